"""W2 through sluice workers placed by Ray against the same number of
workers started by the CLI: the cost of Ray's placement.

    .venv/bin/python bench/ray_bench.py [--data data] [--workers 1,2,4] [--runs 5]

Two dispatchers run side by side, one served by `sluice worker` processes,
the other by sluice.ray.start_workers on a local ray.init() cluster, each
with the same count of workers of --threads compute threads (the Ray ones
at --niceness, 0 as the CLI's unless told). A trainer
process (this one) reads whole epochs of pipelines/w2_service.json (W2's
prefix on the workers; batching, rescale, flip, rotation, zoom and NCHW
here) from each in turn, interleaved, and takes the median samples/s. Also
reports the time to start the workers (until all listen) and this host's
cores: where workers outnumber them, they share them. Prints a table, then
one JSON line.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import time

import ray

import sluice
import sluice.ray

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")


def start(args):
    """A `sluice ARGS` server and its port, once it listens."""
    process = subprocess.Popen(["sluice", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    if "listening on port" not in line:
        raise SystemExit(f"ray_bench: `sluice {' '.join(args)}` did not start")
    return process, int(line.split()[-1])


def stop(processes):
    for p in processes:
        p.send_signal(signal.SIGTERM)
    for p in processes:
        p.wait(timeout=60)


def w2_through(dispatcher, data):
    with open(os.path.join(ROOT, "pipelines", "w2_service.json")) as f:
        definition = json.loads(f.read().replace('"data/', f'"{data}/'))
    for node in definition["nodes"]:
        if "distribute" in node:
            node["distribute"] = {"dispatcher": dispatcher, "job_name": "w2"}
    return sluice.Pipeline(definition)


def epoch_rate(pipe):
    """Samples/s of one whole epoch, from the iterator's start."""
    start = time.perf_counter()
    samples = sum(len(batch["label"]) for batch in pipe)
    return samples / (time.perf_counter() - start), samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.join(ROOT, "data"), help="holds cifar10/*.tfrecord")
    parser.add_argument("--workers", default="1,2,4", help="worker counts to compare")
    parser.add_argument("--threads", type=int, default=1, help="compute threads per worker")
    parser.add_argument("--runs", type=int, default=5, help="epochs per placement and count (median)")
    parser.add_argument("--niceness", type=int, default=0,
                        help="the Ray-placed workers' niceness (Ray's own for actors: 15)")
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(args.data, "cifar10")):
        subprocess.run(["sluice", "make-data", "cifar10", "--out", os.path.join(args.data, "cifar10")], check=True)

    counts = [int(n) for n in args.workers.split(",")]
    ray.init(num_cpus=max(counts) * args.threads, include_dashboard=False, object_store_memory=80 << 20,
             log_to_driver=False)
    rows = []
    for n in counts:
        cli_dispatcher, cli_port = start(["dispatcher", "--port", "0"])
        ray_dispatcher, ray_port = start(["dispatcher", "--port", "0"])
        cli_address, ray_address = f"127.0.0.1:{cli_port}", f"127.0.0.1:{ray_port}"
        began = time.perf_counter()
        cli_workers = [start(["worker", "--dispatcher", cli_address, "--threads", str(args.threads)])[0]
                       for _ in range(n)]
        cli_start_s = time.perf_counter() - began
        began = time.perf_counter()
        ray_workers = sluice.ray.start_workers(n, ray_address, resources={"CPU": args.threads},
                                               niceness=args.niceness)
        ray_start_s = time.perf_counter() - began
        niceness = sorted({w["niceness"] for w in ray_workers.workers()})  # what they got, not what was asked
        pipes = {"cli": w2_through(cli_address, args.data), "ray": w2_through(ray_address, args.data)}
        rates = {"cli": [], "ray": []}
        for placement in ("cli", "ray"):  # warm-up: page cache, the dispatchers' pipelines
            epoch_rate(pipes[placement])
        for _ in range(args.runs):
            for placement in ("cli", "ray"):
                rate, samples = epoch_rate(pipes[placement])
                rates[placement].append(rate)
        ray_workers.stop()
        stop(cli_workers + [cli_dispatcher, ray_dispatcher])
        cli, on_ray = statistics.median(rates["cli"]), statistics.median(rates["ray"])
        rows.append({"workers": n, "samples_per_epoch": samples, "cli_samples_per_s": round(cli),
                     "ray_samples_per_s": round(on_ray), "ray_over_cli": round(on_ray / cli, 3),
                     "cli_start_s": round(cli_start_s, 3), "ray_start_s": round(ray_start_s, 3),
                     "ray_worker_niceness": niceness,
                     "cli_runs": [round(r) for r in rates["cli"]], "ray_runs": [round(r) for r in rates["ray"]]})
        print(f"{n} worker(s): CLI {cli:,.0f} samples/s, Ray {on_ray:,.0f} samples/s, Ray/CLI {on_ray / cli:.3f}; "
              f"start {cli_start_s:.2f} s (CLI), {ray_start_s:.2f} s (Ray)", flush=True)
    ray.shutdown()
    print(json.dumps({"bench": "ray", "cores": os.cpu_count(), "threads_per_worker": args.threads,
                      "runs": args.runs, "rows": rows}))


if __name__ == "__main__":
    main()
