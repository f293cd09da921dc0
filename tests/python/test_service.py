"""The service through the public CLI and Python API: real dispatcher and
worker processes on 127.0.0.1, consumers in their own processes."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import sluice
from conftest import start_server

ROWS = 400

# A consumer of the shared job "shared": prints the sample ids of each batch
# as it takes it. With argv[2] "stall" it stops taking batches after the
# first. The workers blow each 8x8 image up to 512x512 (768 KiB): a split of
# 100 rows is far more than the stream's buffers hold, so a consumer that
# stopped after one batch has finished no split.
_CONSUMER = r"""
import sys
import time
import numpy as np
import sluice
from sluice import ops
pipe = (sluice.arrays({"id": np.arange(%d, dtype=np.int64),
                       "image": np.zeros((%d, 8, 8, 3), np.uint8)}, split_records=100)
        .map(ops.resize(size=[512]))
        .distribute(sys.argv[1], job_name="shared", connect_timeout_s=30)
        .batch(4))
for batch in pipe:
    print(" ".join(str(int(i)) for i in batch["id"]), flush=True)
    while sys.argv[2] == "stall":
        time.sleep(1)
print("end", flush=True)
""" % (ROWS, ROWS)


@pytest.fixture
def cluster():
    """A dispatcher that drops silent consumers after 2 s, and one worker."""
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0",
                                     "--client-timeout", "2", "--worker-timeout", "2"])
    address = f"127.0.0.1:{port}"
    worker, _ = start_server(["worker", "--dispatcher", address, "--host", "127.0.0.1", "--threads", "1"])
    yield address
    for process in (worker, dispatcher):
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def _consumer(address, how):
    return subprocess.Popen([sys.executable, "-c", _CONSUMER, address, how], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def _ids(lines):
    return [int(i) for line in lines if line and line != "end" for i in line.split()]


def test_a_consumer_killed_mid_epoch_loses_the_others_nothing(cluster):
    victim = _consumer(cluster, "stall")
    assert len(_ids([victim.stdout.readline().strip()])) == 4  # it holds a split now
    survivor = _consumer(cluster, "read")
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # The dead consumer's splits go to the survivor once the dispatcher
    # drops it (--client-timeout 2); without that the survivor would wait
    # forever: the timeout is a hang guard, not a timing assertion.
    out, err = survivor.communicate(timeout=120)
    assert survivor.returncode == 0, err
    lines = out.strip().split("\n")
    assert lines[-1] == "end"
    # The victim finished no split: the survivor gets every sample, once.
    assert sorted(_ids(lines)) == list(range(ROWS))


def test_a_ranks_stream_through_a_dispatcher_has_its_in_process_length(cluster):
    # A rank's part (a shard before the node) is one worker's pass: its
    # length is known, as in-process (len() said it was unknown).
    rank = sluice.arrays({"id": np.arange(100, dtype=np.int64)}).shard(2, 1).batch(6)
    remote = rank.distribute(cluster, mode="parallel_epochs")
    assert len(remote) == len(rank) == 8
    assert len(list(remote)) == 8


def test_a_ranks_state_through_a_dispatcher_is_refused_over_other_files(cluster, cifar_dir, tmp_path):
    # A node pool's rank: its shard's stream from a worker. Its state is
    # the in-process one, listing and all: saved over two files, it is
    # refused once the glob matches a third (some samples twice, others
    # never), as in-process.
    import shutil
    files = sorted(cifar_dir.glob("*.tfrecord"))
    for f in files[1:]:
        shutil.copy(f, tmp_path / f.name)
    features = {"image": ("bytes", 3072), "label": "int64"}

    def rank():
        return sluice.tfrecord(str(tmp_path / "*.tfrecord"), features).shard(2, 1).batch(5)

    remote = rank().distribute(cluster, mode="parallel_epochs").iterate(0)
    local = rank().iterate(0)
    next(remote), next(local)
    state = remote.state()
    assert state == local.state()
    rest = [int(i) for b in rank().distribute(cluster, mode="parallel_epochs").iterate(state=state)
            for i in b["label"]]
    assert len(rest) == sum(len(b["label"]) for b in rank()) - 5
    shutil.copy(files[0], tmp_path / files[0].name)
    for saved in (state, local.state()):
        with pytest.raises(sluice.InvalidArgumentError, match=r"saved over another listing of the source's files "
                                                              r"\(2 files, 2 splits, [0-9a-f]{16}; this pipeline's: 3 "
                                                              r"files, 3 splits"):
            next(iter(rank().distribute(cluster, mode="parallel_epochs").iterate(state=saved)))

def test_a_hung_worker_the_dispatcher_found_lost_does_not_hold_back_the_epochs_end(cluster):
    # A second worker, then one of the two stopped (SIGSTOP: hung, not dead,
    # its connections open). The dispatcher finds it lost (--worker-timeout
    # 2) and its splits run on the other; the consumer's stream from it must
    # not keep the epoch from ending.
    second, _ = start_server(["worker", "--dispatcher", cluster, "--host", "127.0.0.1", "--threads", "1"])
    consumer = _consumer(cluster, "read")
    try:
        first = _ids([consumer.stdout.readline().strip()])
        assert len(first) == 4
        second.send_signal(signal.SIGSTOP)
        guard = threading.Timer(120, consumer.kill)  # a hang guard, not a timing assertion
        guard.start()
        lines = consumer.stdout.read().strip().split("\n")  # the rest, after what readline buffered
        guard.cancel()
        err = consumer.stderr.read()
        assert consumer.wait() == 0, err
        assert lines[-1] == "end"
        got = first + _ids(lines)
        assert sorted(got) == list(range(ROWS)), (sorted(set(range(ROWS)) - set(got)), err[-3000:])
    finally:
        second.send_signal(signal.SIGCONT)
        second.kill()
        second.wait()
        consumer.kill()


def test_a_dispatcher_whose_disk_refuses_its_journal_says_so_and_takes_no_work(tmp_path):
    import resource
    import numpy as np
    import sluice

    def small_files():  # writes past 4 KiB fail (EFBIG), as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    work = tmp_path / "work"
    dispatcher = subprocess.Popen(["sluice", "dispatcher", "--host", "127.0.0.1", "--port", "0",
                                   "--work-dir", str(work)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, preexec_fn=small_files)
    try:
        port = int(dispatcher.stdout.readline().split()[-1])
        pipe = (sluice.arrays({"x": np.zeros((1000, 8), np.float32)})
                .distribute(f"127.0.0.1:{port}", connect_timeout_s=2, dispatcher_timeout_s=2).batch(10))
        with pytest.raises(sluice.SluiceError, match="cannot write the journal .*File too large.*accepts no work"):
            list(pipe)
    finally:
        dispatcher.send_signal(signal.SIGTERM)
        dispatcher.wait(timeout=30)
    # What it refused left no partial entry: the journal replays.
    restarted, _ = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0", "--work-dir", str(work)])
    restarted.send_signal(signal.SIGTERM)
    assert restarted.wait(timeout=30) == 0


def test_a_job_name_used_again_after_its_consumers_left_yields_the_data_again(cluster):
    import numpy as np
    import sluice

    for run in range(2):  # before, the second run of a finished job yielded nothing
        pipe = (sluice.arrays({"id": np.arange(300, dtype=np.int64)}, split_records=50)
                .distribute(cluster, job_name="again").batch(32))
        ids = sorted(int(i) for batch in pipe for i in batch["id"])
        assert ids == list(range(300)), f"run {run}"
        del pipe  # the consumer leaves the job


def test_an_epoch_read_again_through_the_same_job_is_refused_not_empty(cluster):
    import numpy as np
    import sluice

    def make():
        return sluice.arrays({"id": np.arange(300, dtype=np.int64)}, split_records=50).distribute(cluster).batch(32)

    def ids(batches):
        return sorted(int(i) for batch in batches for i in batch["id"])

    pipe = make()
    assert ids(pipe.iterate(0)) == list(range(300))
    # The job hands out epoch 0 once: read again it came back empty.
    with pytest.raises(sluice.SluiceError, match="epoch 0 of this pipeline's job at dispatcher .* was read already"):
        ids(pipe.iterate(0))
    assert ids(pipe) == list(range(300))  # the next pass is epoch 1
    assert ids(make().iterate(0)) == list(range(300))  # a pipeline made again has a job of its own


def test_a_worker_busy_sending_reports_its_rate(cluster):
    import json
    import threading

    import numpy as np
    import sluice

    spec = json.loads(sluice.arrays({"id": np.arange(4000, dtype=np.int64)}, split_records=100).to_json())
    spec["nodes"][0]["source"]["throttle_bytes_per_s"] = 4000.0  # 500 rows a second: an epoch of 8 s
    pipe = sluice.Pipeline.from_json(json.dumps(spec)).distribute(cluster).batch(50)
    done = threading.Event()
    reader = threading.Thread(target=lambda: (sum(1 for _ in pipe), done.set()), daemon=True)
    reader.start()
    rates = []
    deadline = time.time() + 60  # a hang guard: a rate shows at the first heartbeat after rows went out
    while not done.is_set() and time.time() < deadline and not any(r > 0 for r in rates):
        rates = [w.get("samples_per_s", 0) for w in sluice.dispatcher_status(cluster)["workers"]]
        time.sleep(0.2)
    assert any(r > 0 for r in rates), f"no worker reported a rate while sending: {rates}"
    reader.join(timeout=60)


def test_no_dispatcher_at_the_address_is_named_as_unreachable():
    import numpy as np
    import sluice
    from conftest import _free_ports

    address = f"127.0.0.1:{_free_ports(1)[0]}"
    pipe = sluice.arrays({"id": np.arange(20)}).distribute(address, connect_timeout_s=1).batch(4)
    with pytest.raises(ConnectionError, match=f"dispatcher {address}: not reachable within connect_timeout_s") as e:
        list(pipe)
    assert isinstance(e.value, sluice.UnavailableError) and isinstance(e.value, sluice.SluiceError)


def test_an_address_without_a_port_or_whose_host_does_not_resolve_is_named():
    import numpy as np
    import sluice

    rows = sluice.arrays({"id": np.arange(20)})
    with pytest.raises(sluice.SluiceError, match=r"address '127.0.0.1' is not host:port \('127.0.0.1:50051'\?\)"):
        list(rows.distribute("127.0.0.1", connect_timeout_s=1).batch(4))
    with pytest.raises(sluice.SluiceError, match=r"its host 'no-such-host.invalid' does not resolve"):
        list(rows.distribute("no-such-host.invalid:4000", connect_timeout_s=1).batch(4))
    with pytest.raises(sluice.SluiceError, match=r"address 'localhost:7070x': port '7070x' is not a number"):
        list(rows.distribute("localhost:7070x", connect_timeout_s=1).batch(4))
    status = subprocess.run(["sluice", "status", "--dispatcher", "127.0.0.1"], capture_output=True, text=True,
                            timeout=60)
    assert "address '127.0.0.1' is not host:port" in status.stderr, status.stderr


# A supervisor (as a Ray actor is) starts a worker with --exit-with its pid,
# prints the worker's pid, and waits.
_SUPERVISOR = r"""
import os, subprocess, sys, time
worker = subprocess.Popen(["sluice", "worker", "--dispatcher", sys.argv[1], "--exit-with", str(os.getpid())],
                          stdout=subprocess.PIPE, text=True)
assert "listening on port" in worker.stdout.readline()
print(worker.pid, flush=True)
time.sleep(600)
"""


def _dead(pid):
    """Gone, or a zombie no one reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_worker_started_with_exit_with_dies_with_its_supervisor(cluster):
    supervisor = subprocess.Popen([sys.executable, "-c", _SUPERVISOR, cluster], stdout=subprocess.PIPE, text=True)
    worker = int(supervisor.stdout.readline())
    supervisor.kill()
    supervisor.wait()
    # Orphaned, it would serve on alone; the kernel kills it instead.
    deadline = time.monotonic() + 30
    while not _dead(worker):
        assert time.monotonic() < deadline, "the worker outlived its supervisor"
        time.sleep(0.05)


def test_exit_with_a_pid_that_is_not_the_parent_is_refused(cluster):
    other = subprocess.Popen(["sleep", "60"])
    try:
        worker = subprocess.run(["sluice", "worker", "--dispatcher", cluster, "--exit-with", str(other.pid)],
                                capture_output=True, text=True, timeout=30)
    finally:
        other.kill()
        other.wait()
    assert worker.returncode != 0
    assert f"--exit-with {other.pid}: this process's parent is {os.getpid()}" in worker.stderr


def test_a_consumer_that_exits_with_a_daemon_thread_alive_leaves_its_job(cluster):
    # The interpreter destroys nothing a daemon thread holds (a prefetching
    # thread's pipeline), and at times nothing at all while one runs: the
    # engine lived on, and the dispatcher dropped its client as silent, a
    # fault.
    import sluice

    script = f"""
import threading, time
import numpy as np
import sluice
pipe = sluice.arrays({{"id": np.arange(100, dtype=np.int64)}}, split_records=10).distribute("{cluster}").batch(10)
threading.Thread(target=lambda held=pipe: time.sleep(600), daemon=True).start()  # as a prefetching thread
n = 0
for batch in pipe.iterate(0):
    n += len(batch["id"])
print(n)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "100", done.stderr
    status = sluice.dispatcher_status(cluster)
    assert sum(int(job.get("clients", 0)) for job in status["jobs"]) == 0, status
    assert "client_dropped" not in status["errors"], status


def test_a_shuffle_before_the_distribute_node_says_it_shuffles_within_each_split(cluster, capfd):
    # Its buffer never holds more than a split there: the same definition
    # shuffled far less on the service, silently.
    rows = {"id": np.arange(100, dtype=np.int64)}
    before = sluice.arrays(rows, split_records=10).shuffle(50).distribute(cluster).batch(10)
    assert sorted(int(i) for b in before for i in b["id"]) == list(range(100))
    assert "(shuffle): in distributed_epoch mode a shuffle before the distribute node shuffles within each split" \
        in capfd.readouterr().err
    after = sluice.arrays(rows, split_records=10).distribute(cluster).shuffle(50).batch(10)
    assert sorted(int(i) for b in after for i in b["id"]) == list(range(100))
    assert "(shuffle)" not in capfd.readouterr().err


def test_dispatcher_status_reports_the_workers_or_says_why_not(cluster, tmp_path):
    import sluice

    # A busy host can hold a heartbeat past the 2 s --worker-timeout: the
    # worker then registers again; wait for that rather than for the clock.
    deadline = time.monotonic() + 60
    status = sluice.dispatcher_status(cluster)
    while not status["workers"] and time.monotonic() < deadline:
        time.sleep(0.2)
        status = sluice.dispatcher_status(cluster)
    assert len(status["workers"]) == 1 and status["workers"][0]["address"].startswith("127.0.0.1:")
    assert status["jobs"] == [] and status["errors"] == {}
    with pytest.raises(sluice.SluiceError, match="dispatcher 127.0.0.1:1"):
        sluice.dispatcher_status("127.0.0.1:1")
    with pytest.raises(sluice.SluiceError, match="no-such-token"):
        sluice.dispatcher_status(cluster, token_file=str(tmp_path / "no-such-token"))


def test_a_worker_whose_token_the_dispatcher_refuses_exits_saying_so(tmp_path):
    (tmp_path / "right").write_text("the-right-token\n")
    (tmp_path / "wrong").write_text("a-wrong-token\n")
    dispatcher, port = start_server(["dispatcher", "--port", "0", "--token-file", str(tmp_path / "right")])
    try:
        # Retrying could never succeed: it exits, so its supervisor shows it.
        worker = subprocess.run(["sluice", "worker", "--dispatcher", f"127.0.0.1:{port}",
                                 "--token-file", str(tmp_path / "wrong")], capture_output=True, text=True, timeout=60)
    finally:
        dispatcher.send_signal(signal.SIGTERM)
        dispatcher.wait(timeout=30)
    assert worker.returncode == 1
    assert f"dispatcher 127.0.0.1:{port} refused this worker" in worker.stderr
    assert "missing or wrong token" in worker.stderr
    assert "a-wrong-token" not in worker.stderr + worker.stdout


def _certificates(folder):
    """A CA, a certificate it signs for 127.0.0.1 (server.pem, server.key),
    a key of nothing (other.key) and one under a passphrase (locked.key),
    made with openssl."""
    script = ("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca && "
              "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 && "
              "printf 'subjectAltName=IP:127.0.0.1' > san.ext && "
              "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
              "-extfile san.ext && openssl genrsa -out other.key 2048 && "
              "openssl genrsa -aes256 -passout pass:secret -out locked.key 2048")
    subprocess.run(script, shell=True, cwd=folder, check=True, capture_output=True, timeout=120)


def test_tls_mistakes_are_named_not_taken_for_a_port_in_use_or_a_dispatcher_not_there(tmp_path):
    _certificates(tmp_path)
    # A key that is not the certificate's read as "is another process listening there?".
    wrong = subprocess.run(["sluice", "dispatcher", "--port", "0", "--tls-cert", str(tmp_path / "server.pem"),
                            "--tls-key", str(tmp_path / "other.key")], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 1
    assert f"the private key {tmp_path / 'other.key'} is not the key of the certificate" in wrong.stderr, wrong.stderr
    locked = subprocess.run(["sluice", "dispatcher", "--port", "0", "--tls-cert", str(tmp_path / "server.pem"),
                             "--tls-key", str(tmp_path / "locked.key")], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert locked.returncode == 1 and "protected by a passphrase" in locked.stderr, locked.stderr
    dispatcher, port = start_server(["dispatcher", "--port", "0", "--tls-cert", str(tmp_path / "server.pem"),
                                     "--tls-key", str(tmp_path / "server.key")])
    try:
        # The consumer waited out connect_timeout_s and blamed the address.
        rows = sluice.arrays({"id": np.arange(20)})
        with pytest.raises(sluice.UnavailableError, match=r"its connection attempts fail: .* \(a dispatcher with "
                                                          r"TLS needs tls_ca_file"):
            list(rows.distribute(f"127.0.0.1:{port}", connect_timeout_s=2).batch(4))
        with pytest.raises(sluice.InvalidArgumentError, match="a client certificate needs its key"):
            list(rows.distribute(f"127.0.0.1:{port}", tls_ca_file=str(tmp_path / "ca.pem"),
                                 tls_cert_file=str(tmp_path / "server.pem"), connect_timeout_s=2).batch(4))
        # A link of 0.3 s a round trip: each attempt had 0.1-0.5 s for TCP and TLS.
        from conftest import TcpProxy

        def slow(data):
            time.sleep(0.3)
            return data
        proxy = TcpProxy(port, reply=slow)
        status = sluice.dispatcher_status(f"127.0.0.1:{proxy.port}", tls_ca_file=str(tmp_path / "ca.pem"))
        assert status["workers"] == []
        proxy.cut()
    finally:
        dispatcher.send_signal(signal.SIGTERM)
        dispatcher.wait(timeout=30)
    with pytest.raises(sluice.SluiceError, match=r"address '127.0.0.1' is not host:port"):
        sluice.dispatcher_status("127.0.0.1")


def test_a_worker_advertising_a_host_with_a_port_is_refused(cluster):
    # It registered as "127.0.0.1:5:PORT", which every consumer retried without end.
    worker = subprocess.run(["sluice", "worker", "--dispatcher", cluster, "--port", "0", "--advertise", "127.0.0.1:5"],
                            capture_output=True, text=True, timeout=60)
    assert worker.returncode == 1
    assert "--advertise '127.0.0.1:5' is not a host name or address (without a port" in worker.stderr, worker.stderr


def _registered(address, worker_address=None):
    """The dispatcher's workers once one (at worker_address, if given) is
    registered; waits for heartbeats, not for a clock."""
    import sluice

    deadline = time.monotonic() + 60
    while True:
        workers = sluice.dispatcher_status(address)["workers"]
        if any(worker_address in (None, w["address"]) for w in workers):
            return workers
        assert time.monotonic() < deadline, f"no worker registered at {address}: {workers}"
        time.sleep(0.1)


def test_a_worker_whose_id_is_another_workers_at_a_restarted_dispatcher_registers_afresh(tmp_path):
    # A journal in which another worker holds the first id.
    journaled, port = start_server(["dispatcher", "--port", "0", "--work-dir", str(tmp_path)])
    other, _ = start_server(["worker", "--dispatcher", f"127.0.0.1:{port}"])
    taken = {w["worker_id"] for w in _registered(f"127.0.0.1:{port}")}
    other.kill()
    journaled.send_signal(signal.SIGTERM)
    journaled.wait(timeout=30)
    # Our worker gets that id from a dispatcher without a journal...
    first, port = start_server(["dispatcher", "--port", "0"])
    address = f"127.0.0.1:{port}"
    worker = subprocess.Popen(["sluice", "worker", "--dispatcher", address], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        worker_address = f"127.0.0.1:{worker.stdout.readline().split()[-1]}"
        assert {w["worker_id"] for w in _registered(address, worker_address)} == taken
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)
        # ...which is replaced, on its port, by the one with the journal. That
        # one keeps the other worker for longer than a busy host may take
        # to bring our worker's next heartbeat (else it would have expired
        # and the id be nobody's).
        second, _ = start_server(["dispatcher", "--port", str(port), "--work-dir", str(tmp_path),
                                  "--worker-timeout", "300"])
        try:
            mine = [w for w in _registered(address, worker_address) if w["address"] == worker_address]
            assert mine[0]["worker_id"] not in taken
            assert worker.poll() is None
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)
    finally:
        worker.kill()
        _, err = worker.communicate(timeout=30)
    assert "is another worker's" in err and "registering again as a new worker" in err


# A consumer of the job "by_identity" whose python op is an object of a
# class defined in its own __main__: pickled with a random id, different
# bytes in every process. argv[2]: a file to wait for after the first batch.
_TRANSFORM_CONSUMER = r"""
import os
import sys
import time
import numpy as np
import sluice
from sluice import ops

class AddOne:
    def __call__(self, sample):
        return {"id": sample["id"] + 1}

pipe = (sluice.arrays({"id": np.arange(2000, dtype=np.int64)}, split_records=50)
        .map(ops.python(AddOne(), inputs="id"))
        .distribute(sys.argv[1], job_name="by_identity", connect_timeout_s=30)
        .batch(10))
for i, batch in enumerate(pipe):
    print(" ".join(str(int(v) - 1) for v in batch["id"]), flush=True)
    while i == 0 and sys.argv[2] != "-" and not os.path.exists(sys.argv[2]):
        time.sleep(0.05)
print("end", flush=True)
"""


def test_consumers_of_one_job_whose_transform_pickles_differently_share_it(cluster, tmp_path):
    import sluice

    go = tmp_path / "go"
    first = subprocess.Popen([sys.executable, "-c", _TRANSFORM_CONSUMER, cluster, str(go)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first_lines = [first.stdout.readline().strip()]
    second = subprocess.Popen([sys.executable, "-c", _TRANSFORM_CONSUMER, cluster, "-"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The first waits until the second has joined (or failed to): the
        # job then has its two consumers whatever their buffers took.
        deadline = time.monotonic() + 60
        while second.poll() is None:
            jobs = sluice.dispatcher_status(cluster)["jobs"]
            if any(j.get("job_name") == "by_identity" and int(j.get("clients", 0)) == 2 for j in jobs):
                break
            assert time.monotonic() < deadline, jobs
            time.sleep(0.05)
        go.write_text("")
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        second_lines = out.splitlines()
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        first_lines += out.splitlines()
    finally:
        for consumer in (first, second):
            consumer.kill()
            consumer.wait()
    assert sorted(_ids(first_lines) + _ids(second_lines)) == list(range(2000))


def test_a_worker_that_cannot_serve_its_metrics_exits_before_it_registers():
    import socket

    import sluice

    dispatcher, port = start_server(["dispatcher", "--port", "0"])
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    metrics_port = taken.getsockname()[1]
    try:
        worker = subprocess.run(["sluice", "worker", "--dispatcher", f"127.0.0.1:{port}", "--metrics-port",
                                 str(metrics_port)], capture_output=True, text=True, timeout=60)
        workers = sluice.dispatcher_status(f"127.0.0.1:{port}")["workers"]
    finally:
        taken.close()
        dispatcher.send_signal(signal.SIGTERM)
        dispatcher.wait(timeout=30)
    assert worker.returncode == 1
    assert f"cannot serve metrics on 127.0.0.1:{metrics_port} (is another process listening there" in worker.stderr
    assert "Civet" not in worker.stderr
    assert workers == []


def test_python_code_with_no_worker_to_check_it_on_says_so_not_that_an_op_is_missing():
    import numpy as np

    import sluice
    from sluice import ops

    dispatcher, port = start_server(["dispatcher", "--port", "0", "--worker-timeout", "1"])
    try:
        pipe = (sluice.arrays({"id": np.arange(10, dtype=np.int64)})
                .map(ops.cast(field="id", dtype="float32"), ops.python(lambda s: s, inputs="id"))
                .distribute(f"127.0.0.1:{port}"))
        with pytest.raises(sluice.SluiceError) as raised:
            next(iter(pipe))
    finally:
        dispatcher.send_signal(signal.SIGTERM)
        dispatcher.wait(timeout=30)
    message = str(raised.value)
    assert "its Python code (a python op or a Python dataset) is checked on a worker: no live worker (0 workers)" \
        in message
    assert "not registered" not in message


def test_a_second_consumer_of_a_named_job_in_one_process_is_told_of_the_first(cluster, capfd):
    import numpy as np

    import sluice

    def make():
        return (sluice.arrays({"id": np.arange(400, dtype=np.int64)}, split_records=50)
                .distribute(cluster, job_name="cell", connect_timeout_s=30).batch(10))

    earlier = iter(make())  # a cell run before, its iterator kept
    next(earlier)
    capfd.readouterr()
    again = make()
    again.engine  # joins the job
    assert "this process already consumes job 'cell' through 1 other pipeline(s)" in capfd.readouterr().err
    del earlier  # gives its share back
    ids = [int(i) for b in again for i in b["id"]]
    assert len(ids) == len(set(ids)) and len(ids) > 0


def test_arrays_too_large_to_register_are_refused_naming_the_node_and_what_to_do(cluster):
    import numpy as np
    import sluice

    images = np.zeros((100_000, 28, 28), np.uint8)  # 75 MiB, inline in the pipeline
    pipe = sluice.arrays({"image": images}).distribute(cluster).batch(32)
    with pytest.raises(sluice.InvalidArgumentError,
                       match=r"the pipeline to register is 75 MiB, past the 64 MiB a dispatcher takes; nodes\[0\] is "
                             r"75 MiB of it \(a source of arrays in memory .*\): write them to files"):
        next(iter(pipe))


def test_rows_too_large_for_the_service_are_refused_saying_where_to_make_them(cluster):
    import numpy as np
    import sluice
    from sluice import ops
    # 20,000 x 20,000 x 3 bytes a row (1.2 GB), from a 4x4 image: the
    # element spec says so before any pixel is made.
    pipe = (sluice.arrays({"image": np.zeros((2, 4, 4, 3), np.uint8)})
            .map(ops.resize(size=[20000, 20000]))
            .distribute(cluster, connect_timeout_s=30))
    with pytest.raises(sluice.InvalidArgumentError, match="has rows of more than 1073741824 bytes, the most one "
                                                          "message of the service carries: run the op that makes it "
                                                          "after the distribute node"):
        next(iter(pipe))


# A consumer whose Python op never returns on one record: prints how the
# epoch ended.
# A consumer whose op does ACTION on sample 123 (of split 1).
_FAILING_OP_CONSUMER = r"""
import os, sys, time
import numpy as np
import sluice

def op(sample):
    if int(sample["x"]) == 123:
        ACTION
    return {"x": sample["x"]}

pipe = (sluice.arrays({"x": np.arange(400, dtype=np.int64)}, split_records=100)
        .map(op).distribute(sys.argv[1], connect_timeout_s=30).batch(50))
try:
    print(sum(len(b["x"]) for b in pipe))
except sluice.DataLossError as e:
    print("DataLossError:", e)
"""


def _consume_through_service(script, dispatcher_flags=(), workers=2):
    """Runs `script` against a dispatcher (with `dispatcher_flags`) and
    `workers` workers of one thread: its (returncode, stdout, stderr)."""
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0", *dispatcher_flags])
    address = f"127.0.0.1:{port}"
    servers = [start_server(["worker", "--dispatcher", address, "--host", "127.0.0.1", "--threads", "1"])[0]
               for _ in range(workers)]
    try:
        consumer = subprocess.Popen([sys.executable, "-c", script, address], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        out, err = consumer.communicate(timeout=180)  # a hang guard, not a timing assertion
    finally:
        for process in (*servers, dispatcher):  # a worker stuck in an op would drain for 30 s
            process.kill()
            process.wait(timeout=30)
    return consumer.returncode, out, err


def test_an_op_that_never_returns_on_a_worker_fails_the_epoch_naming_its_split():
    # Each try's stream stays stuck in the op: the client drops it when its
    # split's lease runs out, so the split can run again and, after three
    # tries, fail the epoch as the faults table says (not wait forever).
    script = _FAILING_OP_CONSUMER.replace("ACTION", "time.sleep(100000)  # a kernel that never returns")
    _, out, err = _consume_through_service(script, ["--split-lease", "2"])
    assert "DataLossError:" in out, out + err[-3000:]
    assert "split 1 failed 3 times (it made no progress for 2s)" in out
    assert "it holds records 100 to 199 of <arrays>" in out
    assert "made no progress for the dispatcher's --split-lease (stuck in an op?): dropped" in err


def test_a_split_that_kills_its_ops_process_fails_the_epoch_saying_how():
    # The error said only "its stream broke"; the cause was in the client's
    # log lines alone.
    _, out, err = _consume_through_service(_FAILING_OP_CONSUMER.replace("ACTION", "os._exit(3)"))
    assert "DataLossError:" in out, out + err[-3000:]
    assert "split 1 failed 3 times (its stream broke: worker " in out, out
    assert "exited with status 3" in out, out


# Each item (or row of the op) takes 0.25 s, a fetch over the network: well
# within the lease, and a split of 16 twice past it.
_SLOW_CONSUMER = r"""
import sys, time
import numpy as np
import sluice

class Slow:
    def __len__(self):
        return 32

    def __getitem__(self, i):
        time.sleep(0.25 if sys.argv[2] == "dataset" else 0)
        return {"id": np.int64(i)}

def op(sample):
    time.sleep(0.25)
    return sample

pipe = sluice.from_dataset(Slow(), split_records=16)
if sys.argv[2] == "op":
    pipe = pipe.map(op)
pipe = pipe.distribute(sys.argv[1], connect_timeout_s=30).batch(8)
print(sorted(int(i) for b in pipe for i in b["id"]))
"""


@pytest.mark.parametrize("slow", ["dataset", "op"])
def test_a_python_split_slower_than_the_lease_goes_on_while_its_rows_come(slow):
    # A split's rows leave the worker only when its call ends: the items (or
    # rows) its Python process begins are what renews the lease meanwhile,
    # not a stuck op's silence.
    code, out, err = _consume_through_service(_SLOW_CONSUMER.replace("sys.argv[2]", repr(slow)),
                                              ["--split-lease", "2"], workers=1)
    assert code == 0, err[-3000:]
    assert out.strip() == str(list(range(32)))
    assert "made no progress" not in err


def test_python_code_goes_to_the_workers_that_run_it_beside_a_no_python_worker():
    import numpy as np

    import sluice
    from sluice import ops

    dispatcher, port = start_server(["dispatcher", "--port", "0"])
    address = f"127.0.0.1:{port}"
    # The worker without Python first: it registers first, and was the one
    # asked to describe the pipeline, refusing it.
    workers = [start_server(["worker", "--dispatcher", address, "--threads", "1", *flags])[0]
               for flags in (["--no-python"], [])]
    try:
        for source in ("op", "dataset"):
            if source == "op":
                pipe = sluice.arrays({"id": np.arange(400, dtype=np.int64)}, split_records=50)
                pipe = pipe.map(ops.python(lambda s: {"id": s["id"] + 1}, inputs="id"))
            else:
                pipe = sluice.from_dataset([{"id": np.int64(i + 1)} for i in range(400)], split_records=50)
            ids = [int(i) for b in pipe.distribute(address).batch(16) for i in b["id"]]
            assert sorted(ids) == list(range(1, 401)), source
    finally:
        for process in (*workers, dispatcher):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


_EMBEDDED_CONSUMER = r"""
import numpy as np
import sluice
pipe = sluice.arrays({"id": np.arange(100, dtype=np.int64)}).distribute(local_workers=2).batch(10)
try:
    print(sum(len(batch["id"]) for batch in pipe), "rows")
except sluice.UnavailableError as e:
    print("UnavailableError:", e)
"""


def test_local_workers_that_cannot_start_fail_the_pass_naming_the_command_not_hang(tmp_path):
    # An older `sluice` first on PATH, or one that is not sluice at all,
    # refuses the worker's flags: each replacement died as it started, forever.
    old = tmp_path / "sluice"
    old.write_text("#!/bin/sh\necho 'sluice: unknown flag --quiet' >&2\nexit 2\n")
    old.chmod(0o755)
    child = subprocess.run([sys.executable, "-c", _EMBEDDED_CONSUMER], capture_output=True, text=True,
                           env={**os.environ, "SLUICE_BINARY": str(old)},
                           timeout=120)  # a hang guard, not a timing assertion: it takes about 5 s
    assert child.returncode == 0, child.stderr
    assert "UnavailableError: the embedded service's workers do not start: local worker process" in child.stdout
    assert f"exited with status 2, the 5th in a row within 10s of its start (the command: {old} worker;" \
        in child.stdout
    assert "sluice: unknown flag --quiet" in child.stderr  # the command's own words
    assert child.stderr.count("given up") == 2  # each of the two places, once
