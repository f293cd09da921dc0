"""sluice workers placed by Ray (sluice.ray) on a local ray.init() cluster,
serving a real dispatcher: W2's prefix through them with an actor killed
mid-epoch (every sample exactly once), a worker process that dies (Ray
restarts it), a worker that cannot start, scaling, and the autoscaling step
on the dispatcher's signal."""

import hashlib
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import sluice  # noqa: E402
import sluice.ray  # noqa: E402
from sluice import ops  # noqa: E402

ROWS = 4000
WAIT_S = 60  # hang guards: what should happen within seconds


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    # Ray's processes find first on PATH a `python3` without sluice, as on a
    # node whose system Python is not the job's: workers must not run
    # Python ops with it.
    shim = tmp_path_factory.mktemp("path-shim")
    (shim / "python3").symlink_to("/usr/bin/python3")
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{shim}{os.pathsep}{path}"
    try:
        # Logical CPUs: room for the actors the tests start on 2 real cores.
        ray.init(num_cpus=8, include_dashboard=False, object_store_memory=80 << 20, log_to_driver=False)
    finally:
        os.environ["PATH"] = path
    yield
    ray.shutdown()


@pytest.fixture
def dispatcher(ray_cluster):
    """A dispatcher that gives a silent worker up after 2 s."""
    process = subprocess.Popen(["sluice", "dispatcher", "--port", "0", "--worker-timeout", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    assert "listening on port" in line, line
    yield f"127.0.0.1:{int(line.split()[-1])}"
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def cifar_files(tmp_path_factory):
    out = tmp_path_factory.mktemp("cifar-ray")
    subprocess.run(["sluice", "make-data", "cifar10", "--out", str(out), "--count", str(ROWS), "--files", "8"],
                   check=True, capture_output=True)
    return str(out / "*.tfrecord")


def _w2_prefix(files):
    """W2 up to its split point: parse, decode, dilation, blur."""
    return (sluice.tfrecord(files, {"image": ("bytes", 3072), "label": "int64"})
            .map(ops.decode_raw(dtype="uint8"), ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3),
                 ops.gaussian_blur(ksize=11, sigma=0.8)))


def _samples(batches, after_each=None):
    """Each sample as (label, digest of its image), sorted: equal lists are
    the same samples, each as often."""
    out = []
    for n, batch in enumerate(batches, 1):
        for label, image in zip(batch["label"], batch["image"]):
            out.append((int(label), hashlib.sha1(image.tobytes()).hexdigest()))
        if after_each:
            after_each(n)
    return sorted(out)


def _stat(pid):
    """/proc/PID/stat's fields after the command: state first."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _alive(pid):
    try:
        return _stat(pid)[0] != "Z"
    except FileNotFoundError:
        return False


def _niceness(pid):
    return int(_stat(pid)[16])


def _can_raise_priority():
    """Whether a process here may lower its niceness (root, CAP_SYS_NICE or
    RLIMIT_NICE): what putting Ray's workers back to 0 takes."""
    probe = "import os; os.setpriority(os.PRIO_PROCESS, 0, 15); os.setpriority(os.PRIO_PROCESS, 0, 0)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def _wait_for(what, predicate):
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}"
        time.sleep(0.1)


def test_w2_on_ray_workers_loses_nothing_when_an_actor_is_killed_mid_epoch(dispatcher, cifar_files):
    expected = _samples(_w2_prefix(cifar_files).batch(50))
    assert len(expected) == ROWS and len(set(expected)) == ROWS  # distinct samples: duplicates would show
    with sluice.ray.start_workers(2, dispatcher) as workers:
        victim = workers.workers()[0]
        # Not Ray's niceness 15 for actors: a worker sharing the trainer's cores would starve.
        expected_niceness = 0 if _can_raise_priority() else 15
        assert [_niceness(w["pid"]) for w in workers.workers()] == [expected_niceness] * 2
        assert [w["niceness"] for w in workers.workers()] == [expected_niceness] * 2

        def kill_after_ten(n):
            if n == 10:
                ray.kill(workers.actors[0], no_restart=False)
            time.sleep(0.02)  # a trainer's step: the epoch is still running at the kill

        pipe = _w2_prefix(cifar_files).distribute(dispatcher, job_name="w2").batch(50)
        got = _samples(pipe, kill_after_ten)
        assert got == expected
        # The worker died with its actor; Ray restarted both.
        _wait_for("the killed actor's worker exits", lambda: not _alive(victim["pid"]))
        restarted = workers.workers()[0]
        assert restarted["error"] is None and restarted["pid"] != victim["pid"] and _alive(restarted["pid"])
        _wait_for("the dispatcher counts the lost worker",
                  lambda: int(sluice.dispatcher_status(dispatcher)["errors"].get("worker_lost", 0)) >= 1)


def test_a_worker_that_dies_is_restarted_by_ray(dispatcher):
    with sluice.ray.start_workers(1, dispatcher) as workers:
        before = workers.workers()[0]
        os.kill(before["pid"], signal.SIGKILL)
        _wait_for("Ray restarts the actor with a new worker", lambda: workers.workers()[0]["pid"] != before["pid"])
        after = workers.workers()[0]
        addresses = lambda: {w["address"] for w in sluice.dispatcher_status(dispatcher)["workers"]}  # noqa: E731
        _wait_for("the new worker registers", lambda: after["address"] in addresses())
        pipe = sluice.arrays({"id": np.arange(500, dtype=np.int64)}, split_records=100).distribute(dispatcher)
        assert sorted(int(i) for b in pipe.batch(64) for i in b["id"]) == list(range(500))


def test_a_python_op_runs_on_ray_workers_in_the_actors_interpreter(dispatcher):
    # The bare worker binary ran it under the `python3` on PATH: "No module
    # named 'sluice'", the pipeline refused.
    with sluice.ray.start_workers(1, dispatcher, threads=1):
        pipe = (sluice.arrays({"id": np.arange(300, dtype=np.int64)}, split_records=100)
                .map(ops.python(lambda sample: {"id": sample["id"] * 2}, outputs={"id": ("int64", [])}))
                .distribute(dispatcher).batch(64))
        assert sorted(int(i) for b in pipe for i in b["id"]) == list(range(0, 600, 2))


def test_a_worker_that_cannot_start_says_why(dispatcher):
    with pytest.raises(sluice.SluiceError, match="did not start on Ray.*--host 0.0.0.0 listens beyond this machine"):
        sluice.ray.start_workers(2, dispatcher, host="0.0.0.0")
    with pytest.raises(sluice.SluiceError, match="not all 1 started within 2 s.*'CPU': 1000"):
        sluice.ray.start_workers(1, dispatcher, resources={"CPU": 1000}, start_timeout_s=2)


def test_scaling_drains_the_workers_it_stops(dispatcher):
    registered = lambda: len(sluice.dispatcher_status(dispatcher)["workers"])  # noqa: E731
    with sluice.ray.start_workers(1, dispatcher, metrics_port=0, niceness=5) as workers:
        workers.scale(3)
        assert len(workers) == 3 and all(w["metrics_port"] > 0 for w in workers.workers())
        expected_niceness = 5 if _can_raise_priority() else 15
        assert [_niceness(w["pid"]) for w in workers.workers()] == [expected_niceness] * 3
        _wait_for("3 workers registered", lambda: registered() == 3)
        stopped = [w["pid"] for w in workers.workers()[1:]]
        workers.scale(1)
        assert len(workers) == 1 and not any(_alive(pid) for pid in stopped)
        _wait_for("the drained workers left the dispatcher", lambda: registered() == 1)
    _wait_for("stop() stops every worker", lambda: registered() == 0)


def _status(needed, serving, job="train"):
    return {"workers": [{"worker_id": str(i)} for i in range(serving)],
            "jobs": [{"job_name": job, "workers_needed": needed, "workers": serving},
                     {"job_name": "other", "workers_needed": 1, "workers": serving}]}


def test_workers_wanted_adds_what_the_signal_misses_within_bounds():
    wanted = sluice.ray.workers_wanted
    assert wanted(_status(needed=5, serving=2), 2, job_name="train") == 5
    # A worker outside the group serves the job too.
    assert wanted(_status(needed=5, serving=3), 2, job_name="train") == 4
    # Without a job name, the job that misses the most.
    assert wanted(_status(needed=5, serving=2), 2) == 5
    assert wanted(_status(needed=9, serving=2), 2, job_name="train", max_workers=6) == 6
    assert wanted(_status(needed=1, serving=1), 1, job_name="train", min_workers=2) == 2
    # Never fewer than the group has, whatever the status says.
    assert wanted(_status(needed=1, serving=3), 3, job_name="train") == 3
    # No such job: no signal, the group stays.
    assert wanted(_status(needed=5, serving=2), 2, job_name="absent") == 2
    assert wanted({"workers": [], "jobs": []}, 3) == 3


def test_autoscale_asks_ray_for_the_workers_the_signal_wants(dispatcher, monkeypatch):
    requested = []
    monkeypatch.setattr("ray.autoscaler.sdk.request_resources", lambda bundles: requested.append(bundles))
    with sluice.ray.start_workers(1, dispatcher, resources={"CPU": 1, "memory": 64 << 20}) as workers:
        # The live dispatcher has no job "train": the group stays as it is.
        assert workers.autoscale(job_name="train") == 1 and requested[-1] == [{"CPU": 1, "memory": 64 << 20}]
        monkeypatch.setattr(sluice.ray, "dispatcher_status", lambda *a, **k: _status(needed=3, serving=1))
        assert workers.autoscale(job_name="train", max_workers=4) == 3
        assert len(workers) == 3 and len(requested[-1]) == 3
        assert all(w["error"] is None for w in workers.workers())
        monkeypatch.setattr(sluice.ray, "dispatcher_status", lambda *a, **k: _status(needed=3, serving=3))
        assert workers.autoscale(job_name="train") == 3  # consumers that do not wait keep what they have
        assert workers.autoscale(job_name="train", max_workers=2) == 2 and len(workers) == 2
    assert requested[-1] == []  # stop() withdrew the request


_STOPPED_AFTER_SHUTDOWN = """
import subprocess, sys
import ray
import sluice.ray
ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 << 20, log_to_driver=False)
dispatcher = subprocess.Popen(["sluice", "dispatcher", "--port", "0"], stdout=subprocess.PIPE, text=True)
address = f"127.0.0.1:{int(dispatcher.stdout.readline().split()[-1])}"
with sluice.ray.start_workers(1, address) as workers:
    pid = workers.workers()[0]["pid"]
    ray.shutdown()
print("initialized" if ray.is_initialized() else "not initialized", pid)
dispatcher.terminate()
dispatcher.wait()
"""


def test_a_group_left_after_ray_shutdown_stops_as_it_stands(tmp_path):
    # Leaving the `with` block started a new local Ray cluster (Ray's
    # auto-init) and raised its "Can't find actor".
    ran = subprocess.run([sys.executable, "-c", _STOPPED_AFTER_SHUTDOWN], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[-3:-1] == ["not", "initialized"], ran.stdout
    worker = int(ran.stdout.split()[-1])
    for _ in range(600):  # a hang guard: the worker goes with its actor
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"worker {worker} outlived ray.shutdown()")
