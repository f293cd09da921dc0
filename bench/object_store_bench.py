"""Reading from an S3-compatible store against reading local files: W2's
CIFAR-10 TFRecords and W3's image folder (one object per JPEG) uploaded to
a SeaweedFS server started here (on this host's loopback, sharing its
cores; with --store-core on a core of its own, the loaders on the rest),
`sluice run --json` of a read-only pipeline (source and batch), of W2 and
of W3 on the local files and on the objects, interleaved, medians;
beside the store's own bandwidth as a skilled client gets it (pyarrow,
8 MiB ranged reads, 4 in flight). W3 also runs from WebDataset shards
(bench/peers/make_shards.py), beside the webdataset library reading the
same objects as its docs say (`pipe:curl`, S3-signed), and beside LitData
and MosaicML Streaming reading the same images in their own formats from
the store (bench/peers/w3_streaming.py: a fresh cache each run, the first
epoch timed, as the webdataset peer). W2 also runs on the objects through the
object cache (filled once before the runs: later epochs), and through a
proxy without and with --latency-ms added to every request, with one
split read at a time (the default) and with parallel_reads 8.

    .venv/bin/python bench/object_store_bench.py --data data [--runs 5] [--epochs 2]
        [--only "w3 shards s3,litdata s3"] [--store-core]

`--data` holds cifar10/*.tfrecord and imagenet/<class>/*.jpg (`sluice
make-data cifar10`, `sluice make-data imagenet`). Prints a table, then one
JSON line.
"""

import argparse
import concurrent.futures
import glob
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import pyarrow.fs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SLUICE = os.path.join(ROOT, "build", "src", "sluice", "cli", "sluice")
KEY, SECRET = "AKIABENCH", "bench-secret"


def free_ports(n):
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(n)]
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_store(root, cores=None):
    """A SeaweedFS server with one user, on `cores` (all when None); returns
    (process, endpoint, client)."""
    with open(os.path.join(root, "s3.json"), "w") as f:
        json.dump({"identities": [{"name": "bench", "credentials": [{"accessKey": KEY, "secretKey": SECRET}],
                                   "actions": ["Admin", "Read", "Write", "List"]}]}, f)
    os.mkdir(os.path.join(root, "data"))
    p = free_ports(8)
    weed = os.path.join(os.path.dirname(sys.executable), "weed")
    process = subprocess.Popen(
        [weed, "server", f"-dir={root}/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-volume.max=200",
         f"-master.port={p[0]}", f"-master.port.grpc={p[1]}", f"-volume.port={p[2]}", f"-volume.port.grpc={p[3]}",
         f"-filer.port={p[4]}", f"-filer.port.grpc={p[5]}", "-s3", f"-s3.port={p[6]}", f"-s3.port.grpc={p[7]}",
         "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={root}/s3.json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
    endpoint = f"http://127.0.0.1:{p[6]}"
    client = pyarrow.fs.S3FileSystem(access_key=KEY, secret_key=SECRET, endpoint_override=endpoint,
                                     region="us-east-1", allow_bucket_creation=True)
    for _ in range(600):
        try:
            client.create_dir("bench")
            return process, endpoint, client
        except OSError:
            time.sleep(0.1)
    sys.exit("SeaweedFS did not start in 60 s")


class DelayProxy:
    """Forwards connections to 127.0.0.1:`target`, holding each chunk a
    client sends for `delay_s` first: a GET (one chunk: HTTP/1.1 sends one
    request at a time on a connection) waits that much longer, as across a
    network. netem would do it in the kernel; these hosts have no netem."""

    def __init__(self, target, delay_s):
        self.target, self.delay_s = target, delay_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(("127.0.0.1", self.target))
            for a, b, delay in ((client, server, self.delay_s), (server, client, 0)):
                threading.Thread(target=self._pump, args=(a, b, delay), daemon=True).start()

    @staticmethod
    def _pump(src, dst, delay_s):
        try:
            while data := src.recv(1 << 20):
                if delay_s:
                    time.sleep(delay_s)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def store_bandwidth(client, paths):
    """MB/s of reading every object once: 8 MiB ranged reads, 4 in flight."""
    def read(path):
        f = client.open_input_file(path)
        size, offset = f.size(), 0
        while offset < size:
            offset += len(f.read_at(min(8 << 20, size - offset), offset))
        return size
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        total = sum(pool.map(read, paths))
    return total / (time.perf_counter() - start) / 1e6


def pipelines(data, tmp, cache):
    """{name: JSON file}: read-only, W2, W3 (an image folder) and W3 from
    WebDataset shards, on the local files and the objects; W2 on the
    objects through the object cache `cache`."""
    w2 = json.load(open(os.path.join(ROOT, "pipelines", "w2_cifar10.json")))
    w3 = json.load(open(os.path.join(ROOT, "pipelines", "w3_imagenet.json")))
    read_only = {"nodes": [w2["nodes"][0], {"batch": {"size": 256}}]}
    w3_shards = json.loads(json.dumps(w3))
    w3_shards["nodes"][0] = {"source": {"webdataset": {"files": ["data/imagenet-shards/*.tar"]},
                                        "shuffle_splits": True}}
    out = {}
    for name, spec in (("read", read_only), ("w2", w2), ("w3", w3), ("w3 shards", w3_shards)):
        for where, prefix in (("local", f"{data}/"), ("s3", "s3://bench/")):
            text = json.dumps(spec).replace('"data/', json.dumps(prefix)[:-1])
            path = os.path.join(tmp, f"{name}_{where}.json")
            with open(path, "w") as f:
                f.write(text)
            out[f"{name} {where}"] = path
    readers = json.loads(open(out["w2 s3"]).read())
    readers["nodes"][0]["source"]["parallel_reads"] = 8
    out["w2 s3 8 reads"] = os.path.join(tmp, "w2_s3_8_reads.json")
    with open(out["w2 s3 8 reads"], "w") as f:
        json.dump(readers, f)
    cached = json.loads(open(out["w2 s3"]).read())
    cached["nodes"][0]["source"]["object_cache"] = {"dir": cache, "max_bytes": 8 << 30}
    out["w2 s3 cached"] = os.path.join(tmp, "w2_s3_cached.json")
    with open(out["w2 s3 cached"], "w") as f:
        json.dump(cached, f)
    return out


def webdataset_peer(data, endpoint, tmp):
    """The webdataset library's W3 reading the shards from the store, each
    through `pipe:curl` with S3's request signing; returns its command."""
    peer_py = subprocess.run([os.path.join(HERE, "peers", "ensure_wds_venv.sh")], check=True, capture_output=True,
                             text=True).stdout.strip().splitlines()[-1]
    urls = os.path.join(tmp, "shard-urls.txt")
    with open(urls, "w") as f:
        for shard in sorted(glob.glob(os.path.join(data, "imagenet-shards", "*.tar"))):
            f.write(f"pipe:curl -sf --aws-sigv4 aws:amz:us-east-1:s3 --user {KEY}:{SECRET} "
                    f"{endpoint}/bench/imagenet-shards/{os.path.basename(shard)}\n")
    return [peer_py, os.path.join(HERE, "peers", "w3_webdataset.py"), "--data", data, "--urls", urls,
            "--batches", "6"]


def streaming_peers(data, client, tmp):
    """LitData and MosaicML Streaming: W3's images written in each one's
    format (bench/peers/w3_streaming.py) and uploaded under bench/litdata
    and bench/mds; returns {name: a function of a fresh cache folder giving
    the reading command}."""
    peer_py = subprocess.run([os.path.join(HERE, "peers", "ensure_stream_venv.sh")], check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
    script = os.path.join(HERE, "peers", "w3_streaming.py")
    commands = {}
    for library, prefix in (("litdata", "litdata"), ("mosaic", "mds")):
        out = os.path.join(tmp, prefix)
        subprocess.run([peer_py, script, "write", "--library", library, "--data", os.path.join(data, "imagenet"),
                        "--out", out], check=True, stdout=sys.stderr)  # its progress: not the table's
        for name in sorted(os.listdir(out)):
            with client.open_output_stream(f"bench/{prefix}/{name}") as f:
                f.write(open(os.path.join(out, name), "rb").read())
        commands[f"{library} s3"] = lambda cache, library=library, prefix=prefix: [
            peer_py, script, "read", "--library", library, "--data", f"s3://bench/{prefix}", "--cache", cache,
            "--warmup", "1", "--batches", "6"]
    return commands


class PeerFailed(Exception):
    pass


def run_peer(command, env=None):
    """The peer's samples/s; PeerFailed with its last error line when it fails."""
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        print(out.stderr[-4000:], file=sys.stderr)
        raise PeerFailed(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"]


def run(path, epochs, env):
    out = subprocess.run([SLUICE, "run", path, "--epochs", str(epochs), "--json", "--quiet"], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder holding cifar10/*.tfrecord")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--latency-ms", type=int, default=20, help="added to each request through a proxy")
    parser.add_argument("--only", help="run only these configurations (comma-separated names as the table prints)")
    parser.add_argument("--store-core", action="store_true",
                        help="the store on this host's last core and every loader on the others, as a store on "
                             "another machine: a loader has the same CPUs reading objects as reading local files")
    args = parser.parse_args()
    files = sorted(glob.glob(os.path.join(args.data, "cifar10", "*.tfrecord")))
    if not files or not glob.glob(os.path.join(args.data, "imagenet", "*", "*.jpg")):
        sys.exit(f"no {args.data}/cifar10/*.tfrecord or {args.data}/imagenet/*/*.jpg: write them with "
                 "`sluice make-data cifar10` and `sluice make-data imagenet`")
    with tempfile.TemporaryDirectory() as tmp:
        cores = sorted(os.sched_getaffinity(0))
        if args.store_core and len(cores) < 2:
            sys.exit("--store-core needs two cores or more")
        process, endpoint, client = start_store(tmp, {cores[-1]} if args.store_core else None)
        if args.store_core:
            os.sched_setaffinity(0, cores[:-1])  # every loader started from here inherits it
            print(f"the store on core {cores[-1]}, the loaders on {cores[:-1]}", file=sys.stderr)
        try:
            subprocess.run(["/usr/bin/python3", os.path.join(HERE, "peers", "make_shards.py"), "--data",
                            os.path.join(args.data, "imagenet"), "--out", os.path.join(args.data, "imagenet-shards")],
                           check=True)
            images = sorted(glob.glob(os.path.join(args.data, "imagenet", "*", "*.jpg")))
            images += sorted(glob.glob(os.path.join(args.data, "imagenet-shards", "*.tar")))
            print(f"uploading {len(files)} files and {len(images)} images to {endpoint} ...", file=sys.stderr)
            for f in files + images:
                with client.open_output_stream(f"bench/{os.path.relpath(f, args.data)}") as out:
                    out.write(open(f, "rb").read())
            env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
                       AWS_REGION="us-east-1")
            configs = pipelines(args.data, tmp, os.path.join(tmp, "cache"))
            run(configs["w2 s3 cached"], 1, env)  # fills the cache: the runs read its copies
            port = int(endpoint.rsplit(":", 1)[1])
            proxies = {f"{name} +{ms}ms": (name, DelayProxy(port, ms / 1000))
                       for name in ("w2 s3", "w2 s3 8 reads") for ms in (0, args.latency_ms)}
            names = list(configs) + list(proxies) + ["webdataset s3", "litdata s3", "mosaic s3", "store bandwidth"]
            if args.only:
                names = [name for name in names if name in args.only.split(",")]
            peer = webdataset_peer(args.data, endpoint, tmp) if "webdataset s3" in names else None
            streaming = (streaming_peers(args.data, client, tmp)
                         if {"litdata s3", "mosaic s3"} & set(names) else {})
            rates = {name: [] for name in names}
            failures = {}
            for r in range(args.runs):
                order = names[r % len(names):] + names[:r % len(names)]  # each round starts one later
                for name in order:
                    if name in proxies:
                        config, proxy = proxies[name]
                        proxied = dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}")
                        rates[name].append(run(configs[config], args.epochs, proxied)["samples_per_s"])
                    elif name == "webdataset s3":
                        rates[name].append(run_peer(peer))
                    elif name in streaming:
                        cache = tempfile.mkdtemp(dir=tmp)  # a fresh job: nothing downloaded yet
                        # MosaicML Streaming takes the endpoint from S3_ENDPOINT_URL.
                        try:
                            rates[name].append(run_peer(streaming[name](cache), dict(env, S3_ENDPOINT_URL=endpoint)))
                        except PeerFailed as e:  # counted and shown, not hidden in a median
                            failures.setdefault(name, []).append(str(e))
                    elif name == "store bandwidth":
                        rates[name].append(store_bandwidth(client, [f"bench/cifar10/{os.path.basename(f)}"
                                                                    for f in files]))
                    else:
                        rates[name].append(run(configs[name], args.epochs, env)["samples_per_s"])
                print(f"round {r + 1}/{args.runs} done", file=sys.stderr)
        finally:
            process.kill()
            process.wait()
    medians = {name: statistics.median(v) for name, v in rates.items() if v}
    print(f"{'configuration':<18} {'median':>12}  runs")
    for name in names:
        unit = "MB/s" if name == "store bandwidth" else "samples/s"
        if name in medians:
            print(f"{name:<18} {medians[name]:>12,.0f}  {unit}; " + ", ".join(f"{v:,.0f}" for v in rates[name]))
        for error in failures.get(name, []):
            print(f"{name:<18} {'failed':>12}  {error}")
    ratios = [(f"{name}: objects / local files", f"{name} s3", f"{name} local")
              for name in ("read", "w2", "w3", "w3 shards")]
    ratios += [(f"w3 shards from objects: sluice / {peer}", "w3 shards s3", peer)
               for peer in ("webdataset s3", "litdata s3", "mosaic s3")]
    ratios.append(("w2: cached objects / local files", "w2 s3 cached", "w2 local"))
    ratios += [(f"{name}: +{args.latency_ms} ms a request / through the same proxy without",
                f"{name} +{args.latency_ms}ms", f"{name} +0ms") for name in ("w2 s3", "w2 s3 8 reads")]
    for label, a, b in ratios:
        if a in medians and b in medians:
            print(f"{label} = {medians[a] / medians[b]:.2f}")
    print(json.dumps({"medians": medians, "runs": rates, "failures": failures}))


if __name__ == "__main__":
    main()
