"""placement "auto": the options, the report, the levers a user's choices
hold fixed, and moves mid-epoch between the trainer's process and a local
worker process that keep every sample exactly once with the same bytes."""

import fcntl
import gc
import glob
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import sluice
from conftest import start_server
from sluice import ops

ROWS = 2000


def _pipe(unordered=True, **options):
    images = (np.arange(ROWS * 8 * 8 * 3, dtype=np.int64) % 251).reshape(-1, 8, 8, 3).astype(np.uint8)
    return (sluice.arrays({"id": np.arange(ROWS, dtype=np.int64), "image": images}, split_records=50)
            .map(ops.random_flip(mode="horizontal"), ops.color_jitter(brightness=0.5))
            .batch(20)
            .with_options(seed=11, unordered=unordered, placement="auto", **options))


def _take(it, n=None):
    """{id: image bytes} of `n` batches of `it` (all when None), checking no id twice."""
    out = {}
    for k, batch in enumerate(it):
        for i, image in zip(batch["id"], batch["image"]):
            assert int(i) not in out, f"sample {i} delivered twice"
            out[int(i)] = image.tobytes()
        if n is not None and k + 1 == n:
            break
    return out


def _reference():
    """Each sample's bytes in an uninterrupted epoch 0 as written."""
    manual = _pipe(unordered=False).with_options(placement="manual")
    return _take(manual.iterate(0))


def test_moves_to_a_local_worker_and_back_mid_epoch_exactly_once():
    reference = _reference()
    pipe = _pipe()
    it = pipe.iterate(0)
    got = _take(it, 20)
    assert it._it._move_to(threads=1, local_workers=1)
    _merge(got, _take(it, 40))
    assert it._it._move_to(threads=2, local_workers=0)
    _merge(got, _take(it))
    assert sorted(got) == list(range(ROWS))
    assert got == reference  # each sample's augmentation, whichever process made it


def test_skip_counts_read_by_another_thread_while_the_epoch_moves():
    # A monitoring thread reading `skipped` while next() moved the epoch to
    # another placement read the iterator being destroyed (SIGSEGV).
    it = sluice.arrays({"x": np.arange(200_000, dtype=np.int32)}, split_records=1000).batch(64).iterate()
    moves, reads = [0], [0]

    def reader():
        while moves[0] < 2000:
            assert it._it.skipped == 0 and it._it.skip_summary == ""
            reads[0] += 1

    watcher = threading.Thread(target=reader)
    watcher.start()
    try:
        while moves[0] < 2000:
            assert it._it._move_to(threads=1 + moves[0] % 2, local_workers=0)
            moves[0] += 1
    finally:
        moves[0] = 2000
        watcher.join()
    assert reads[0] > 0


@pytest.fixture
def service():
    """A real dispatcher and one worker on 127.0.0.1: (its address, the
    dispatcher's process)."""
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0"])
    worker, _ = start_server(["worker", "--dispatcher", f"127.0.0.1:{port}", "--host", "127.0.0.1",
                              "--threads", "1"])
    yield f"127.0.0.1:{port}", dispatcher
    for process in (worker, dispatcher):
        process.kill()
        process.wait()  # reaped: a zombie would show in later tests' checks for processes left behind


def _merge(got, more):
    """`more` added to `got`, checking no sample came twice."""
    assert not set(got) & set(more)
    got.update(more)


def test_moves_to_the_dispatchers_workers_and_back_mid_epoch_exactly_once(service):
    address, _ = service
    reference = _reference()
    pipe = _pipe(placement_service=address)
    assert pipe.placement()["levers"]["service_workers"]
    it = pipe.iterate(0)
    got = _take(it, 20)
    assert it._it._move_to(threads=1, local_workers=0, service_workers=True)
    assert pipe.placement()["running"]["service_workers"]
    assert "the dispatcher's workers" in pipe.placement()["running"]["description"]
    _merge(got, _take(it, 40))
    assert it._it._move_to(threads=2, local_workers=0, service_workers=False)
    _merge(got, _take(it))
    assert sorted(got) == list(range(ROWS))
    assert got == reference  # each sample's augmentation, wherever it was made


def test_an_epoch_on_the_dispatchers_workers_goes_on_here_when_the_dispatcher_is_lost(service):
    address, dispatcher = service
    reference = _reference()
    pipe = _pipe(placement_service={"dispatcher": address, "dispatcher_timeout_s": 1})
    it = pipe.iterate(0)
    got = _take(it, 10)
    assert it._it._move_to(threads=2, local_workers=0, service_workers=True)
    _merge(got, _take(it, 10))
    dispatcher.kill()
    dispatcher.wait()
    _merge(got, _take(it))
    assert sorted(got) == list(range(ROWS))
    assert got == reference
    report = pipe.placement()
    assert not report["running"]["service_workers"]
    assert any("the dispatcher's workers were lost" in d and address in d
               for d in report["decisions"]), report["decisions"]


def test_a_trainer_that_waits_with_every_core_busy_gets_the_dispatchers_workers(service):
    """Nothing else can help: the threads are at the cores, the trainer
    computes on no core (so no local worker process), the source is not
    files (no prefix to keep). The policy tries the dispatcher's workers;
    every epoch, before and after, is exactly once with the same bytes."""
    address, _ = service
    pipe = _pipe(placement_service=address)
    manual = _pipe().with_options(placement="manual")
    moved, epoch, deadline = False, 0, time.monotonic() + 240
    while not moved and time.monotonic() < deadline:
        assert _take(pipe.iterate(epoch)) == _take(manual.iterate(epoch)), f"epoch {epoch}"
        moved = any("moves to the dispatcher's workers" in d for d in pipe.placement()["decisions"])
        epoch += 1
    assert moved, pipe.placement()
    assert _take(pipe.iterate(epoch)) == _take(manual.iterate(epoch))


def test_an_ordered_epoch_moves_threads_mid_epoch_but_not_to_a_worker():
    pipe = _pipe(unordered=False)
    manual = _pipe(unordered=False).with_options(placement="manual")
    ids = [b["id"].tolist() for b in manual.iterate(0)]
    it = pipe.iterate(0)
    first = [next(it)["id"].tolist() for _ in range(10)]
    # An ordered state does not move to workers, which deliver as rows come.
    assert not it._it._move_to(threads=2, local_workers=1)
    assert it._it._move_to(threads=1, local_workers=0)
    rest = [b["id"].tolist() for b in it]
    assert first + rest == ids


def test_the_report_says_where_it_runs_and_what_may_move():
    report = _pipe().placement()
    assert report["mode"] == "auto"
    assert report["placement"]["local_workers"] == 0
    assert "in the trainer's process" in report["placement"]["description"]
    assert report["levers"]["threads"] and report["levers"]["local_workers"]
    assert report["decisions"] == [] and report["last_window"] is None
    manual = _pipe().with_options(placement="manual").placement()
    assert manual["mode"] == "manual"
    assert not report["levers"]["service_workers"]  # no dispatcher named


def test_a_dispatcher_for_placement_is_checked():
    with pytest.raises(ValueError, match='placement_service names a dispatcher for placement "auto"'):
        _pipe(placement_service="127.0.0.1:1").with_options(placement="manual").engine
    with pytest.raises(ValueError, match="placement_service.dispatcher is empty"):
        _pipe(placement_service={"job_name": "train"}).engine
    # Named but unreachable: the pipeline starts in this process; the move
    # there is refused and undone, with the dispatcher's address in the reason.
    pipe = _pipe(placement_service={"dispatcher": "127.0.0.1:1", "connect_timeout_s": 1})
    it = pipe.iterate(0)
    got = _take(it, 5)
    assert not it._it._move_to(threads=1, local_workers=0, service_workers=True)
    assert any("127.0.0.1:1" in d for d in pipe.placement()["decisions"])
    got.update(_take(it))
    assert sorted(got) == list(range(ROWS))


def test_a_users_explicit_choices_are_kept():
    assert not _pipe(threads=1).placement()["levers"]["threads"]
    images = np.zeros((10, 4), np.uint8)
    written = (sluice.arrays({"image": images}).distribute(local_workers=1).batch(5)
               .with_options(placement="auto"))
    assert not json.loads(written.engine.placement())["levers"]["local_workers"]
    # The report says where the written distribute node runs the work.
    for placement in ("auto", "manual"):
        two = sluice.arrays({"image": images}).distribute(local_workers=2).batch(5).with_options(placement=placement)
        assert sum(len(b["image"]) for b in two) == 10
        running = two.placement()["running"]
        assert running["local_workers"] == 2, running
        assert running["description"].startswith("2 local worker processes, the rest in the trainer's process")
    # Arrow data held by this process cannot be read by a worker process.
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"x": np.arange(10, dtype=np.int64)})
    held = sluice.from_arrow(table).batch(5).with_options(placement="auto")
    assert not held.placement()["levers"]["local_workers"]


def test_the_embedded_services_workers_log_nothing_routine():
    # Their stderr and the embedded dispatcher's are the trainer's (a
    # notebook cell's output): only what goes wrong belongs there, not
    # their start, the joins and the drain at the end.
    script = ("import numpy as np, sluice\n"
              "pipe = sluice.arrays({'x': np.arange(40, dtype=np.int64)}).distribute(local_workers=1).batch(8)\n"
              "print(sorted(int(x) for b in pipe for x in b['x']) == list(range(40)))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
    assert "worker:" not in done.stderr and "dispatcher:" not in done.stderr, done.stderr
    assert "embedded service: dispatcher at 127.0.0.1:" in done.stderr  # one line says what started


def test_a_run_long_enough_reports_its_measurements():
    pipe = _pipe()
    window, deadline = None, time.monotonic() + 120  # a window is 2 s of the job, across epochs
    while window is None and time.monotonic() < deadline:
        for _ in pipe:
            pass
        window = pipe.placement()["last_window"]
    assert window is not None
    assert window["samples_per_s"] > 0
    assert 0 <= window["trainer_wait_share"] <= 1
    assert window["cores"] >= 1
    assert window["placement"]["local_workers"] in (0, 1)


def _prefix_pipe(cifar_dir, **options):
    """Reads CIFAR records, dilates and blurs them (no random draws: a
    prefix to keep), then shuffles rows and flips at random."""
    return (sluice.tfrecord(str(cifar_dir / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"},
                            shuffle_splits=True, split_records=20)
            .map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3), ops.gaussian_blur(ksize=5, sigma=1.0))
            .shuffle(64)
            .batch(10)
            .map(ops.random_flip(mode="horizontal"))
            .with_options(seed=5, placement="auto", **options))


def _over_the_kept_prefix(pipe, take, worker):
    """Epoch 1 of `pipe` (`take`n): 5 elements as written, 10 with its
    prefix kept (in a local worker process when `worker`), the rest as
    written again."""
    pipe.engine._keep_prefix()
    it = pipe.iterate(1)
    got = take(it, 5)
    assert it._it._move_to(threads=1 if worker else 2, local_workers=int(worker), keep_prefix=True)
    got += take(it, 10)
    assert it._it._move_to(threads=2, local_workers=0, keep_prefix=False)
    return got + take(it)


def _batches(it, n=None):
    """Each batch's labels and image bytes."""
    out = []
    for batch in it:
        out.append((batch["label"].tobytes(), batch["image"].tobytes()))
        if n is not None and len(out) == n:
            break
    return out


def test_the_kept_prefix_takes_an_epoch_over_and_back_with_the_same_bytes(cifar_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    reference = _batches(_prefix_pipe(cifar_dir).with_options(placement="manual").iterate(1))
    pipe = _prefix_pipe(cifar_dir)
    assert pipe.placement()["levers"]["keep_prefix"]
    got = _over_the_kept_prefix(pipe, _batches, worker=False)
    assert len(glob.glob(str(tmp_path / "sluice-prefix-*" / "part-*.tfrecord"))) == 3
    assert "300 records" in pipe.placement()["kept_prefix"]
    assert got == reference  # every row once, in order, with its own flip
    # A state saved on the kept prefix restores where it is not kept.
    it = pipe.iterate(1)
    assert it._it._move_to(threads=2, local_workers=0, keep_prefix=True)
    got = _batches(it, 7)
    state = it.state()
    resumed = _prefix_pipe(cifar_dir).with_options(placement="manual").iterate(state=state)
    assert got + _batches(resumed) == reference
    del it, pipe
    gc.collect()
    assert not glob.glob(str(tmp_path / "sluice-prefix-*")), "the kept prefix outlived its pipeline"


def _rows(it, n=None):
    """Each row's label and image bytes, of `n` batches of `it` (all when None)."""
    out = []
    for k, batch in enumerate(it):
        out += [(int(label), image.tobytes()) for label, image in zip(batch["label"], batch["image"])]
        if n is not None and k + 1 == n:
            break
    return out


def test_the_kept_prefix_moves_to_a_local_worker_and_back_exactly_once(cifar_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    reference = sorted(_rows(_prefix_pipe(cifar_dir, unordered=True).with_options(placement="manual").iterate(1)))
    got = _over_the_kept_prefix(_prefix_pipe(cifar_dir, unordered=True), _rows, worker=True)
    assert sorted(got) == reference  # every row once, each with its own flip


def test_a_prefix_that_cannot_be_kept_says_why_and_the_pipeline_runs_as_written(cifar_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    data = bytearray((cifar_dir / "train-00000-of-00003.tfrecord").read_bytes())
    frame = 16 + struct.unpack("<Q", data[:8])[0]
    data[frame + 12 + 50] ^= 0xFF  # record 1's data
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    pipe = (sluice.tfrecord(str(path), {"image": ("bytes", 3072), "label": "int64"}, on_corrupt="skip")
            .map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3)).batch(11)
            .with_options(placement="auto"))
    with pytest.raises(Exception, match=f"record 1 of {path} was skipped as corrupt"):
        pipe.engine._keep_prefix()
    assert "could not be kept" in pipe.placement()["kept_prefix"]
    assert sum(len(b["label"]) for b in pipe) == 99
    # A directory a killed process left is removed by the next that keeps a
    # prefix there; one a live process holds the lock of stays.
    stale, live = tmp_path / "sluice-prefix-1-abcdef", tmp_path / "sluice-prefix-2-abcdef"
    for d in (stale, live):
        d.mkdir()
        os.utime(d, (time.time() - 120, time.time() - 120))
    held = os.open(live, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    _prefix_pipe(cifar_dir).engine._keep_prefix()
    assert not stale.exists() and live.exists()
    os.close(held)


def test_a_pipeline_without_a_deterministic_prefix_keeps_none(cifar_dir, tmp_path):
    def never_kept(pipe):
        assert not pipe.placement()["levers"]["keep_prefix"]
        with pytest.raises(Exception, match="no deterministic prefix to keep"):
            pipe.engine._keep_prefix()

    never_kept(_pipe())  # random from its first map on, and data this process holds
    records = sluice.tfrecord(str(cifar_dir / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"})
    # A Python op's draws are its own: sluice cannot see them.
    never_kept(records.map(ops.python(lambda s: s)).batch(10).with_options(placement="auto"))
    # A shuffle over images read whole draws from a buffer: the records
    # written would be picked by number, in another order.
    subprocess.run(["sluice", "make-data", "imagenet", "--out", str(tmp_path / "images"), "--count", "4",
                    "--classes", "1"], check=True, capture_output=True)
    never_kept(sluice.image_folder(tmp_path / "images", shuffle=False)
               .map(ops.decode_image(size=[8, 8])).shuffle(4).batch(2).with_options(placement="auto"))


def test_a_bad_placement_is_named():
    with pytest.raises(ValueError, match="placement"):
        _pipe().with_options(placement="sideways")
    definition = json.loads(_pipe().to_json())
    definition["options"]["placement"] = "sideways"
    with pytest.raises(Exception, match=r'options.placement: "sideways" is not a placement'):
        sluice.Pipeline.from_json(json.dumps(definition)).schema


def _local_workers():
    """The pids of this process's `sluice worker` children."""
    pids = []
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            ppid = next(line for line in open(status) if line.startswith("PPid:")).split()[1]
            cmdline = open(status.replace("status", "cmdline"), "rb").read().split(b"\0")
        except (OSError, StopIteration):
            continue  # gone meanwhile
        if int(ppid) == os.getpid() and b"worker" in cmdline[1:2]:
            pids.append(int(status.split("/")[2]))
    return pids


def test_a_local_worker_killed_mid_epoch_is_replaced_and_every_sample_comes_once_with_its_bytes():
    reference = _reference()
    pipe = _pipe()
    it = pipe.iterate(0)
    assert it._it._move_to(threads=1, local_workers=1)
    got = _take(it, 20)
    workers = _local_workers()
    assert workers, "no local worker process found"
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    done = {}
    taker = threading.Thread(target=lambda: done.update(rest=_take(it)), daemon=True)
    taker.start()
    taker.join(120)  # a hang guard, not a timing assertion: it takes about a second
    assert "rest" in done, "the epoch did not go on after its only worker process was killed"
    _merge(got, done["rest"])
    assert sorted(got) == list(range(ROWS))
    assert got == reference
    assert not set(_local_workers()) & set(workers)  # replaced
