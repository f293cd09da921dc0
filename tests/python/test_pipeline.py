"""The Python front over the C++ engine: builder, zero-copy numpy batches,
determinism and errors."""

import gc
import json
import os
import re
import statistics
import struct
import subprocess
import threading
import time

import numpy as np
import pytest

import sluice
from sluice import ops


def mnist(d):
    return sluice.mnist(str(d / "train-images-idx3-ubyte"), str(d / "train-labels-idx1-ubyte"))


def cifar(d):
    return sluice.tfrecord(str(d / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"})


def test_batches_hold_the_files_values(mnist_dir):
    raw = (mnist_dir / "train-labels-idx1-ubyte").read_bytes()[8:]
    images = np.frombuffer((mnist_dir / "train-images-idx3-ubyte").read_bytes()[16:], np.uint8)
    batches = list(mnist(mnist_dir).batch(256))
    assert [b["label"].shape[0] for b in batches] == [256, 256, 88]
    labels = np.concatenate([b["label"] for b in batches])
    np.testing.assert_array_equal(labels, np.frombuffer(raw, np.uint8))
    np.testing.assert_array_equal(batches[1]["image"].reshape(-1), images[256 * 784:512 * 784])


def test_length_when_the_source_size_is_known(mnist_dir, cifar_dir):
    assert len(mnist(mnist_dir).batch(256)) == 3
    assert len(mnist(mnist_dir).batch(256, drop_remainder=True).repeat(2)) == 4
    assert len(mnist(mnist_dir).take(10)) == 10
    with pytest.raises(TypeError, match="unknown"):
        len(cifar(cifar_dir))                 # not indexed
    with pytest.raises(TypeError, match="forever"):
        len(mnist(mnist_dir).repeat())


def test_arrays_share_sluice_buffers(mnist_dir):
    batch = next(iter(mnist(mnist_dir).batch(64)))
    image = batch["image"]
    assert not image.flags["OWNDATA"]          # a view of the C++ batch
    view = image.reshape(-1)
    view[0] = 255                              # write through one view,
    assert image[0, 0, 0] == 255               # read through the other


def test_builder_round_trips_json(cifar_dir):
    pipe = cifar(cifar_dir).map(ops.reshape(shape=[32, 32, 3]), ops.gaussian_blur(ksize=3, sigma=1.0)).batch(8)
    again = sluice.Pipeline.from_json(pipe.to_json())
    assert again.to_json() == pipe.to_json()
    assert pipe.schema == [("image", "uint8", [32, 32, 3]), ("label", "int64", [])]


def test_a_bytes_column_is_said_to_have_any_length(cifar_dir):
    raw = sluice.tfrecord(f"{cifar_dir}/*.tfrecord")
    assert raw.schema == [("record", "uint8", [None])]
    sample = next(iter(raw))
    assert sample["record"].ndim == 1 and sample["record"].dtype == np.uint8


def test_one_seed_gives_identical_batches_whatever_the_thread_count(cifar_dir):
    def run(threads):
        pipe = (cifar(cifar_dir)
                .map(ops.reshape(shape=[32, 32, 3]), ops.gaussian_blur(ksize=5, sigma=[0.5, 1.5]))
                .batch(32)
                .map(ops.rescale(scale=1 / 255), ops.random_flip(), ops.random_rotation(degrees=20))
                .with_options(seed=5, threads=threads))
        return [b["image"].copy() for b in pipe]
    one, two = run(1), run(2)
    assert len(one) == 10
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def _thread_names():
    import pathlib
    return {(t / "comm").read_text().strip() for t in pathlib.Path("/proc/self/task").iterdir()}


def test_a_map_after_the_batch_runs_in_the_map_before_it_with_the_same_batches(cifar_dir):
    # The executor runs map_3's per-sample ops in map_1's threads, before
    # the batch (one set of runners, no batches handed between them); a
    # prefetch between the batch and the map keeps them apart. Same bytes,
    # same draws (keyed by each sample's identity), over two epochs.
    def pipe(apart):
        front = (cifar(cifar_dir).map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3))
                 .batch(32, drop_remainder=True))
        if apart:
            front = front.prefetch(2)
        return (front.map(ops.rescale(scale=1 / 255), ops.random_flip(), ops.random_rotation(degrees=36),
                          ops.random_zoom(scale=[0.9, 1.1]), ops.hwc_to_chw())
                .with_options(seed=7, threads=2))

    merged, apart = pipe(False), pipe(True)
    for epoch in range(2):
        it = merged.iterate(epoch)
        first = next(it)
        running = _thread_names()
        batches = [first] + list(it)
        expected = list(apart.iterate(epoch))
        assert len(batches) == len(expected) == 9
        for a, b in zip(batches, expected):
            assert a["image"].shape == (32, 3, 32, 32)
            np.testing.assert_array_equal(a["image"], b["image"])
            np.testing.assert_array_equal(a["label"], b["label"])
        assert any(name.startswith("map_1+map_3/") for name in running), running
        assert not any(name.startswith("map_3/") for name in running), running


def test_parallel_reads_give_the_rows_of_one_reader_in_its_order(cifar_dir):
    def run(readers):
        pipe = (sluice.tfrecord(str(cifar_dir / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"},
                                parallel_reads=readers)
                .map(ops.reshape(shape=[32, 32, 3]), ops.random_flip())
                .batch(32))
        return [b for b in pipe]
    one, three = run(1), run(3)
    assert sum(len(b["label"]) for b in one) == 300
    np.testing.assert_array_equal(np.concatenate([b["label"] for b in one]),
                                  np.concatenate([b["label"] for b in three]))
    np.testing.assert_array_equal(np.concatenate([b["image"] for b in one]),
                                  np.concatenate([b["image"] for b in three]))


def test_each_pass_is_a_new_epoch(cifar_dir):
    pipe = cifar(cifar_dir).shuffle(300).batch(300).with_options(seed=1)
    first = next(iter(pipe))["label"].copy()
    second = next(iter(pipe))["label"].copy()
    assert sorted(first) == sorted(second)
    assert not np.array_equal(first, second)
    pipe.set_epoch(0)
    np.testing.assert_array_equal(next(iter(pipe))["label"], first)


def test_a_repeats_passes_draw_anew_in_every_outer_epoch():
    # A repeat's passes are numbered outer * 2^20 + i: outer epoch 4096
    # replayed epoch 0's order and augmentations when the draws kept 32 bits.
    x = np.random.default_rng(0).integers(0, 256, (40, 8, 8, 3), dtype=np.uint8)
    pipe = (sluice.arrays({"image": x, "id": np.arange(40, dtype=np.int64)}).shuffle(16)
            .map(ops.random_crop(size=6), ops.color_jitter(brightness=0.5)).repeat(2).batch(80))
    first = next(pipe.iterate(0))
    later = next(pipe.iterate(4096))
    assert sorted(first["id"]) == sorted(later["id"])
    assert not np.array_equal(first["id"], later["id"])
    assert not np.array_equal(first["image"], later["image"])


def test_errors_are_builtin_exceptions_with_the_cpp_message(tmp_path, cifar_dir):
    with pytest.raises(FileNotFoundError, match="no file matches pattern"):
        sluice.tfrecord(str(tmp_path / "*.tfrecord")).schema
    with pytest.raises(ValueError, match="op 'gaussian_blur': attr 'sigma' must be 1 or 2 values, each > 0"):
        cifar(cifar_dir).map(ops.reshape(shape=[32, 32, 3]), ops.gaussian_blur(sigma=-1)).schema
    with pytest.raises(ValueError, match=r"invalid pipeline JSON: \(nodes\[0\]\.batch\.size\)"):
        sluice.Pipeline.from_json('{"nodes": [{"batch": {"size": "big"}}]}').schema
    with pytest.raises(TypeError, match="unknown attrs"):
        ops.gaussian_blur(sigmaa=1)
    # JSON carries no NaN: named here, not as a parse error of the pipeline's JSON.
    with pytest.raises(ValueError, match=r"normalize\(\): attr 'std' is \[nan\]: attrs are finite numbers"):
        ops.normalize(std=[float("nan")])
    with pytest.raises(ValueError, match=r"random_rotation\(\): attr 'degrees' is inf"):
        ops.random_rotation(degrees=np.float32("inf"))
    # numpy's numbers are numbers (they failed in json.dumps, naming nothing);
    # what is none is named with its op.
    blur = ops.gaussian_blur(ksize=np.int64(3), sigma=np.array([1.0, 2.0]))
    assert blur["attrs"] == {"ksize": 3, "sigma": [1.0, 2.0]}
    assert type(blur["attrs"]["ksize"]) is int
    with pytest.raises(TypeError, match=r"gaussian_blur\(\): attr 'sigma' is a set \(\{1.0\}\): attrs are numbers, "
                                        r"strings, booleans or lists of them"):
        ops.gaussian_blur(ksize=3, sigma={1.0})
    rows = sluice.arrays({"x": np.zeros(4, np.float32)})
    assert rows.with_options(seed=np.uint64(3), threads=np.int32(1)).schema == [("x", "float32", [])]
    with pytest.raises(TypeError, match=r"seed must be a whole number, got 1.5"):
        rows.with_options(seed=1.5)
    with pytest.raises(TypeError, match=r"shuffle's buffer_size must be a whole number, got nan"):
        rows.shuffle(float("nan"))  # was a parse error at a column of JSON the user never wrote
    # Its bytes wrapped around int64 to a small block (SIGSEGV); a batch
    # larger than memory (2**40 rows here) is the same error, from
    # std::bad_alloc, where the kernel refuses that much.
    with pytest.raises(sluice.SluiceError, match=r"node 'batch_1': cannot allocate a batch of 4611686018427387904 "
                                                 r"rows of 4 bytes each: more memory than this process can have"):
        next(iter(rows.batch(2**62)))
    with pytest.raises(TypeError, match=r"batch's drop_remainder must be True or False, got 'no'"):
        rows.batch(2, drop_remainder="no")  # a non-empty string dropped the remainder
    with pytest.raises(sluice.InvalidArgumentError, match=r"arrays column 'x': a sample's shape must be positive, "
                                                         r"got \[0\]"):
        sluice.arrays({"x": np.zeros((5, 0), np.float32)}).schema
    # Options no pipeline can take, named.
    with pytest.raises(ValueError, match=r"options.memory_budget_bytes must be >= 0 \(0: sized to the machine\), "
                                         r"got -5"):
        rows.with_options(memory_budget_bytes=-5).schema
    for threads in (-1, 100000):  # beyond the cap, starting them would abort at the process's thread limit
        with pytest.raises(ValueError, match=rf"options.threads must be in \[0, 1024\] \(0: one per usable core\), "
                                             rf"got {threads}"):
            rows.with_options(threads=threads).schema
    with pytest.raises(ValueError, match=r"node 'map_1' \(nodes\[1\]\): parallelism must be in \[0, 1024\]"):
        rows.map(ops.random_flip(), parallelism=5000).schema
    with pytest.raises(ValueError, match=r"node 'prefetch_1' \(nodes\[1\]\): buffer_size must be >= 0"):
        rows.prefetch(-3).schema
    with pytest.raises(TypeError, match="unordered must be True or False, got 'yes'"):
        rows.with_options(unordered="yes")
    # A feature the records lack: NotFound naming feature, record and file.
    pipe = sluice.tfrecord(str(cifar_dir / "*.tfrecord"), {"box": ("float32", [4])})
    with pytest.raises(FileNotFoundError, match=r"record 0 of .*train-00000-of-00003.tfrecord: feature 'box' missing"):
        list(pipe)


def test_a_definition_saved_with_a_byte_order_mark_reads_as_without(tmp_path):
    pipe = sluice.arrays({"x": np.arange(6, dtype=np.int64)}).batch(4)
    again = sluice.Pipeline.from_json("\ufeff" + pipe.to_json())
    assert [len(b["x"]) for b in again] == [4, 2]


def test_every_error_is_a_sluice_error_and_the_builtin_users_catch():
    assert issubclass(sluice.InvalidArgumentError, sluice.SluiceError)
    assert issubclass(sluice.InvalidArgumentError, ValueError)
    assert issubclass(sluice.NotFoundError, sluice.SluiceError)
    assert issubclass(sluice.NotFoundError, FileNotFoundError)
    assert issubclass(sluice.DataLossError, sluice.SluiceError)
    assert issubclass(sluice.CancelledError, sluice.SluiceError)
    assert issubclass(sluice.SluiceError, RuntimeError)
    with pytest.raises(sluice.SluiceError, match="unknown op 'no_such_op'"):
        sluice.arrays({"x": np.zeros(4, np.float32)}).map({"op": "no_such_op", "attrs": {}}).schema
    # A state the pipeline cannot save (a second shuffle) is Unimplemented.
    it = sluice.arrays({"x": np.arange(8)}).shuffle(4).shuffle(4).iterate(0)
    next(it)
    with pytest.raises(NotImplementedError, match="node 'shuffle_2'") as raised:
        it.state()
    assert isinstance(raised.value, sluice.UnimplementedError) and isinstance(raised.value, sluice.SluiceError)


def test_corrupt_record_is_data_loss_or_counted_skip(tmp_path, cifar_dir):
    data = bytearray((cifar_dir / "train-00000-of-00003.tfrecord").read_bytes())
    length = struct.unpack("<Q", data[:8])[0]
    frame = 16 + length
    data[frame + 12 + 50] ^= 0xFF                      # record 1's data
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    with pytest.raises(sluice.DataLossError, match=f"data crc mismatch\\) in {path} at offset {frame}"):
        list(sluice.tfrecord(str(path), {"label": "int64"}).batch(10))
    assert issubclass(sluice.DataLossError, RuntimeError)
    pipe = sluice.tfrecord(str(path), {"label": "int64"}, on_corrupt="skip").batch(1000)
    it = pipe.engine.iterate(0)
    batch = it.next_numpy()
    assert batch["label"].shape[0] == 99 and it.skipped == 1
    epoch = pipe.iterate(0)  # the public iterator says the same
    assert sum(len(b["label"]) for b in epoch) == 99 and epoch.skipped == 1
    assert str(path) in epoch.skip_summary and "data crc mismatch" in epoch.skip_summary


def test_dropping_pipelines_and_batches_keeps_memory_flat(mnist_dir):
    def rss_mb():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
    def cycle():
        pipe = mnist(mnist_dir).map(ops.normalize(mean=0.5, std=0.5, scale=1 / 255)).batch(128)
        for _ in pipe:
            pass
    for _ in range(50):
        cycle()
    gc.collect()
    before = rss_mb()
    for _ in range(1000):
        cycle()
    gc.collect()
    assert rss_mb() - before < 20


def test_running_100_epochs_keeps_memory_flat(cifar_dir):
    def rss_mb():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
    pipe = (cifar(cifar_dir)
            .map(ops.reshape(field="image", shape=[32, 32, 3]), ops.grey_dilation(size=3))
            .shuffle(100).batch(64).map(ops.rescale(scale=1 / 255), ops.random_flip()))
    for _ in range(10):  # warm-up: the pool and the heap reach their working set
        for _ in pipe:
            pass
    rss = []
    for _ in range(100):
        for _ in pipe:
            pass
        rss.append(rss_mb())
    # Medians of 20 epochs at the start, middle and end: RSS moves by a few
    # MB between epochs, and in a process that ran many other tests it once
    # stepped up by 8 MB and stayed there (the heap's arenas, as threads
    # come and go). A leak grows in both halves: 100 KB per epoch adds 4 MB
    # to each.
    start, middle, end = (statistics.median(rss[i:i + 20]) for i in (0, 40, 80))
    assert min(middle - start, end - middle) < 3, rss
    assert end - start < 16, rss


def test_arrays_source_yields_the_arrays_rows():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    label = np.arange(10, dtype=np.int64)
    pipe = sluice.arrays({"x": x, "label": label}).map(ops.rescale(field="x", scale=2.0)).batch(4)
    assert len(pipe) == 3
    batches = list(pipe)
    assert [b["x"].shape for b in batches] == [(4, 2), (4, 2), (2, 2)]
    np.testing.assert_array_equal(np.concatenate([b["x"] for b in batches]), 2 * x)
    np.testing.assert_array_equal(np.concatenate([b["label"] for b in batches]), label)
    assert sluice.Pipeline.from_json(pipe.to_json()).to_json() == pipe.to_json()
    with pytest.raises(ValueError, match=r"column 'y': dtype must be one of .*, got float64: convert it first, "
                                         r"e\.g\. 'y': values\.astype\(np\.float32\)"):
        sluice.arrays({"y": np.zeros(3, np.float64)})
    with pytest.raises(ValueError, match=r"got uint16: convert it first, e\.g\. 'depth': values\.astype\(np\.int32\)"):
        sluice.arrays({"depth": np.zeros(3, np.uint16)})


# A child's lines that print "waiting" once its main thread is inside
# sluice's next(), however long that takes.
_ANNOUNCE_IN_NEXT = """
main = threading.main_thread().ident


def announce():
    while sys._current_frames()[main].f_code.co_name != "__next__":
        time.sleep(0.001)
    print("waiting", flush=True)


threading.Thread(target=announce, daemon=True).start()
"""

_BLOCKED_CHILD = """
import signal
import sys
import threading
import time
import traceback
# Python's own Ctrl-C handler, even when this test runs where SIGINT is
# ignored (a background job inherits SIG_IGN, and Python then keeps it).
signal.signal(signal.SIGINT, signal.default_int_handler)
import sluice
from sluice import ops
# An endless repeat whose filter drops every sample: next() never returns.
pipe = (sluice.tfrecord(sys.argv[1], {"label": "int64"}).repeat()
        .filter(ops.keep_if(cmp="<", value=-1)).batch(8))
it = iter(pipe)
""" + _ANNOUNCE_IN_NEXT + """try:
    next(it)
except KeyboardInterrupt:
    print("interrupted in", traceback.extract_stack(sys.exc_info()[2].tb_frame)[-1].name,
          traceback.extract_tb(sys.exc_info()[2])[-1].name, flush=True)
del it
batch = next(iter(sluice.tfrecord(sys.argv[1], {"label": "int64"}).batch(8)))
print("after", len(batch["label"]), flush=True)
"""


def _interrupted_while_waiting(script, *args):
    """Runs `script`, sends it SIGINT once it says "waiting" (in next());
    its (returncode, stdout, stderr)."""
    import signal
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "waiting"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)  # a hang guard, not a timing assertion
    finally:
        child.kill()
    return child.returncode, out, err


def test_ctrl_c_stops_a_pipeline_blocked_in_next(cifar_dir):
    code, out, err = _interrupted_while_waiting(_BLOCKED_CHILD, str(cifar_dir / "*.tfrecord"))
    assert code == 0, err
    # Raised from inside the C++ next(), and the process can go on using sluice.
    assert "interrupted in <module> __next__" in out
    assert "after 8" in out


_HUNG_ON_A_LOCAL_WORKER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
import sluice


def op(sample, started=sys.argv[1]):
    open(started, "w").close()
    time.sleep(100000)  # never returns
    return sample


pipe = sluice.arrays({"x": np.arange(64, dtype=np.int64)}).map(op).distribute(local_workers=1).batch(8)
try:
    next(iter(pipe))
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_on_a_python_op_stuck_on_a_local_worker_ends_the_trainer(tmp_path):
    # The trainer's exit waited for its local worker to drain, which waited
    # out its 35 s for the stream stuck in the op.
    import signal
    import subprocess
    import sys
    started = tmp_path / "started"
    child = subprocess.Popen([sys.executable, "-c", _HUNG_ON_A_LOCAL_WORKER, str(started)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        while not started.exists() and child.poll() is None:
            time.sleep(0.01)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)  # a hang guard, not a timing assertion
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert out.split() == ["interrupted"]
    assert "after the signal" not in err, err  # the worker's line on giving up its drain


_MAKING_CHILD = """
import signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, sys.argv[1])
import numpy as np
import sluice
from sluice import ops
main = threading.main_thread().ident


def announce():  # once the main thread makes the engine
    while sys._current_frames()[main].f_code.co_name != "engine":
        time.sleep(0.001)
    print("making", flush=True)


source = sluice.arrays({"x": np.arange(4, dtype=np.int64)})
pipe = (source.distribute("127.0.0.1:1", connect_timeout_s=600) if sys.argv[2] == "distribute"
        else source.map(ops.python("never_imported:fn")))
threading.Thread(target=announce, daemon=True).start()
try:
    pipe.engine
except KeyboardInterrupt:
    print("interrupted", flush=True)
print("after", len(list(sluice.arrays({"x": [1, 2, 3]}))), flush=True)
"""


@pytest.mark.parametrize("waits_for", ["distribute", "python_import"])
def test_ctrl_c_stops_a_pipeline_being_made(tmp_path, waits_for):
    """Making it waits for a dispatcher that is not there (up to its
    connect_timeout_s of 600 s) or for a python op's module whose import
    never ends: Ctrl-C stops either at once, and the op's process goes."""
    import signal
    import subprocess
    import sys
    pid_file = tmp_path / "pid"
    (tmp_path / "never_imported.py").write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\nwhile True:\n    time.sleep(1)\n")
    child = subprocess.Popen([sys.executable, "-c", _MAKING_CHILD, str(tmp_path), waits_for],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "making"
        if waits_for == "python_import":
            while not pid_file.exists() or not pid_file.read_text():
                time.sleep(0.01)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)  # a hang guard: without the fix it waits for ever (or 600 s)
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert out.split() == ["interrupted", "after", "3"]
    if waits_for == "python_import":
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text()), 0)


_SAVING_HANDLER_CHILD = """
import os
import signal
import sys
import threading
import time
import numpy as np
import sluice
from sluice import ops
released = sys.argv[1]  # a file: samples from 30 on wait for it (in the op's process)


def hold(x):
    while x >= 30 and not os.path.exists(released):
        time.sleep(0.01)
    return x


pipe = sluice.arrays({"x": np.arange(100, dtype=np.int64)}).map(ops.python(hold, column="x")).batch(10)
it = iter(pipe)
saved = []


def save_and_stop(signum, frame):  # a trainer's handler: save where it stands, then stop
    saved.append(it.state())
    open(released, "w").close()
    raise KeyboardInterrupt


signal.signal(signal.SIGINT, save_and_stop)
for _ in range(3):
    next(it)
""" + _ANNOUNCE_IN_NEXT + """try:
    next(it)
except KeyboardInterrupt:
    print("interrupted", flush=True)
rest = [int(x) for batch in pipe.iterate(state=saved[0]) for x in batch["x"]]
print("resumed", rest, flush=True)
"""


def test_a_sigint_handler_can_save_the_state_of_the_pass_it_interrupts(tmp_path):
    code, out, err = _interrupted_while_waiting(_SAVING_HANDLER_CHILD, str(tmp_path / "released"))  # it deadlocked
    assert code == 0, err
    # The handler ran during next(); its state is after the three batches delivered.
    assert "interrupted" in out
    assert f"resumed {list(range(30, 100))}" in out


@pytest.mark.parametrize("compress", ["gzip", "zlib"])
def test_compressed_tfrecords_read_as_the_plain_ones_and_resume(tmp_path, cifar_dir, compress):
    # TensorFlow's GZIP option (TFX writes its examples so) and its ZLIB
    # option (one zlib stream, as Python's zlib writes it), found by their
    # first bytes.
    import gzip
    import zlib
    squeeze = gzip.compress if compress == "gzip" else zlib.compress
    plain = sorted(cifar_dir.glob("*.tfrecord"))[:2]
    for f in plain:
        (tmp_path / (f.name + ".gz")).write_bytes(squeeze(f.read_bytes()))

    def pipe(files):
        return sluice.tfrecord(files, {"image": ("bytes", 3072), "label": "int64"}, shuffle_splits=True).batch(100)
    want = [(b["image"].tobytes(), b["label"].tolist()) for b in pipe([str(f) for f in plain])]
    compressed = pipe(str(tmp_path / "*.gz"))
    assert [(b["image"].tobytes(), b["label"].tolist()) for b in compressed] == want
    whole = [b["label"].tolist() for b in compressed.iterate(0)]
    it = compressed.iterate(0)
    seen = [b["label"].tolist() for _, b in zip(range(7), it)]
    assert seen + [b["label"].tolist() for b in compressed.iterate(state=it.state())] == whole
    # A cut one is skipped whole under "skip", the others read.
    (tmp_path / "cut.gz").write_bytes(squeeze(plain[0].read_bytes())[:-100])
    it = iter(sluice.tfrecord([str(tmp_path / "cut.gz"), str(tmp_path / (plain[1].name + ".gz"))],
                              {"label": "int64"}, on_corrupt="skip").batch(1000))
    second = sum(len(b["label"]) for b in sluice.tfrecord(str(plain[1]), {"label": "int64"}).batch(1000))
    assert sum(len(b["label"]) for b in it) == second and it.skipped == 1
    cut = (tmp_path / "cut.gz").stat().st_size
    assert f"cut.gz: {compress} data is damaged" in it.skip_summary
    assert f"cut.gz: 1 record, {cut} bytes" in it.skip_summary
    assert f"skipped the whole file, {cut} compressed bytes, whose records are not counted" in it.skip_summary
    indexed = subprocess.run(["sluice", "index", str(tmp_path / (plain[0].name + ".gz"))], capture_output=True,
                             text=True, timeout=60)
    assert indexed.returncode != 0 and "compressed (GZIP or ZLIB): it is read whole" in indexed.stderr


@pytest.mark.parametrize("damage, error, message", [
    # (how the first file is damaged, the exception, the message with {path})
    (lambda d: d[:-5], sluice.DataLossError, "truncated record in {path} at offset"),
    (lambda d: d[:8] + bytes([d[8] ^ 1]) + d[9:], sluice.DataLossError,
     r"length crc mismatch\) in {path} at offset 0"),
    (lambda d: b"this is not a TFRecord file at all, just text", sluice.DataLossError,
     r"in {path} at offset 0 \(is this a TFRecord file\?\)"),
    (lambda d: __import__("gzip").compress(d)[:-100], sluice.DataLossError,
     r"{path}: gzip data is damaged near compressed byte \d+: the file ends within a gzip member"),
    (lambda d: __import__("zlib").compress(d)[:-100], sluice.DataLossError,
     r"{path}: zlib data is damaged near compressed byte \d+: the file ends within the zlib stream"),
    (lambda d: (lambda z: z[:-2] + bytes([z[-2] ^ 1]) + z[-1:])(__import__("zlib").compress(d)),
     sluice.DataLossError, r"{path}: zlib data is damaged near compressed byte \d+: the stream's Adler-32 differs"),
    (lambda d: __import__("zlib").compress(d) + b"x", sluice.DataLossError,  # the inflater took it in
     r"{path}: zlib data is damaged near compressed byte \d+: bytes after the zlib stream"),
    (lambda d: (lambda z: z.compress(d) + z.flush())(__import__("zlib").compressobj(zdict=d[:64])),
     sluice.DataLossError, r"in {path} at offset 0 \(it starts like a zlib stream .* preset dictionary"),
])
def test_each_corrupt_tfrecord_is_data_loss_naming_file_and_offset(tmp_path, cifar_dir, damage,
                                                                   error, message):
    data = (cifar_dir / "train-00000-of-00003.tfrecord").read_bytes()
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(damage(data))
    with pytest.raises(error, match=message.format(path=re.escape(str(path)))):
        list(sluice.tfrecord(str(path), {"label": "int64"}).batch(1000))


def test_a_plain_tfrecord_whose_first_length_looks_like_zlib_is_read_as_plain(tmp_path):
    # A first record of 376 bytes starts 78 01, a zlib header; its length's
    # CRC damaged, the file is a damaged plain one: resynced under "skip",
    # not refused whole as zlib data. `sluice inspect` of a damaged zlib
    # file says so without the engine's status payloads.
    import struct
    import zlib

    def masked_crc(data):  # CRC32C (Castagnoli), bit by bit, masked as TFRecords store it
        crc = 0xffffffff
        for byte in data:
            crc ^= byte
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
        crc ^= 0xffffffff
        return (((crc >> 15) | (crc << 17)) + 0xa282ead8) & 0xffffffff

    def frame(data):
        length = struct.pack("<Q", len(data))
        return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))
    records = [b"a" * 376, b"second", b"third"]
    data = bytearray(b"".join(frame(r) for r in records))
    assert data[:2] == b"\x78\x01"
    data[8] ^= 1
    (tmp_path / "look.tfrecord").write_bytes(bytes(data))
    it = iter(sluice.tfrecord(str(tmp_path / "look.tfrecord"), on_corrupt="skip"))
    assert [bytes(r["record"]) for r in it] == [b"second", b"third"] and it.skipped == 1
    (tmp_path / "cut.z").write_bytes(zlib.compress(b"".join(frame(r) for r in records))[:-20])
    inspected = subprocess.run(["sluice", "inspect", str(tmp_path / "cut.z")], capture_output=True, text=True,
                               timeout=60)
    assert "zlib data is damaged" in inspected.stderr and "sluice.io" not in inspected.stderr


def test_wrong_feature_type_or_length_names_feature_record_and_file(cifar_dir):
    first = cifar_dir / "train-00000-of-00003.tfrecord"
    with pytest.raises(ValueError, match=f"record 0 of {first}: feature 'image': expected 3000 bytes, got 3072"):
        list(sluice.tfrecord(str(first), {"image": ("bytes", 3000)}))
    with pytest.raises(ValueError, match=f"record 0 of {first}: feature 'label'"):
        list(sluice.tfrecord(str(first), {"label": "float32"}))


def test_an_epoch_out_of_range_is_named():
    pipe = sluice.arrays({"i": np.arange(4, dtype=np.int64)})
    with pytest.raises(ValueError, match="epoch must be >= 0, got -1"):
        pipe.iterate(-1)
    with pytest.raises(ValueError, match="epoch must be <= 18446744073709551615, got 18446744073709551616"):
        pipe.iterate(2**64)
    assert len(list(pipe.iterate(2**64 - 1))) == 4


def test_a_feature_declared_with_another_kinds_field_is_refused_naming_it(cifar_dir):
    with pytest.raises(TypeError, match="feature 'image': a bytes feature's length .* must be a whole number, got"):
        sluice.tfrecord(str(cifar_dir / "*.tfrecord"), {"image": ("bytes", [16])})
    with pytest.raises(TypeError, match="feature 'label': an int64 feature's shape must be a whole number, got 'x'"):
        sluice.tfrecord(str(cifar_dir / "*.tfrecord"), {"label": ("int64", ["x"])})
    with pytest.raises(ValueError, match="features\\[0\\] 'image': shape is for int64 and float32 features"):
        sluice.tfrecord(str(cifar_dir / "*.tfrecord"), {"image": {"dtype": "bytes", "shape": [16]}}).schema
    one = sluice.tfrecord(str(cifar_dir / "*.tfrecord"), {"label": ("int64", np.int64(1))})
    assert one.schema == [("label", "int64", [1])]


def test_idx_and_cifar_files_of_the_wrong_kind_are_clear_errors(tmp_path, mnist_dir):
    images = tmp_path / "images"
    data = bytearray((mnist_dir / "train-images-idx3-ubyte").read_bytes())
    data[3] = 4  # rank 3 -> 4
    images.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"not a uint8 IDX file of rank 3: {images}"):
        sluice.mnist(str(images), str(mnist_dir / "train-labels-idx1-ubyte")).schema
    cifar = tmp_path / "data_batch_1.bin"
    cifar.write_bytes(b"x" * (3073 * 2 + 5))
    with pytest.raises(sluice.DataLossError, match=f"not a CIFAR-10 binary file: {cifar}"):
        sluice.cifar10(str(cifar)).schema


def test_distribute_runs_the_prefix_on_local_workers_and_yields_the_same_samples(cifar_dir):
    local = (cifar(cifar_dir)
             .map(ops.reshape(field="image", shape=[32, 32, 3]), ops.grey_dilation(size=3))
             .batch(50).map(ops.random_flip()))
    prefix_end = 2  # after the first map
    d = json.loads(local.to_json())
    d["nodes"].insert(prefix_end, {"distribute": {"local_workers": 2}})
    distributed = sluice.Pipeline(d)
    assert distributed.to_json() != local.to_json()
    by_label = lambda batches: sorted(
        (int(l), img.tobytes()) for b in batches for l, img in zip(b["label"], b["image"]))
    assert by_label(distributed) == by_label(local)


def test_a_typo_in_the_local_workers_part_is_named_before_any_worker_starts(capfd):
    d = json.loads(sluice.arrays({"image": np.zeros((10, 4, 4, 3), np.uint8)}).to_json())
    d["nodes"] += [{"map": {"ops": [{"op": "random_flp"}]}}, {"distribute": {"local_workers": 1}},
                   {"batch": {"size": 5}}]
    with pytest.raises(sluice.InvalidArgumentError, match="unknown op 'random_flp'; did you mean 'random_flip'"):
        list(sluice.Pipeline(d))
    assert "embedded service" not in capfd.readouterr().err  # no dispatcher nor worker was started


def test_local_workers_leave_the_scripts_stdout_its_own(cifar_dir):
    """A training script's stdout holds what it prints, nothing of the
    worker processes (their announcements and logs go to stderr)."""
    import subprocess
    import sys
    script = (
        "import sys, sluice\n"
        "from sluice import ops\n"
        "p = (sluice.tfrecord(sys.argv[1], {'image': ('bytes', 3072), 'label': 'int64'})\n"
        "     .map(ops.reshape(field='image', shape=[32, 32, 3]))\n"
        "     .distribute(local_workers=1).batch(50))\n"
        "print('rows', sum(len(b['label']) for b in p))\n")
    run = subprocess.run([sys.executable, "-c", script, str(cifar_dir / "*.tfrecord")], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "rows 300\n"
    assert "worker listening on port" in run.stderr


_INTERRUPTED_CHILD = (
    "import signal, sys, sluice\n"
    "from sluice import ops\n"
    "signal.signal(signal.SIGINT, lambda *_: print('interrupted', flush=True))\n"
    "p = (sluice.tfrecord(sys.argv[1], {'image': ('bytes', 3072), 'label': 'int64'})\n"
    "     .map(ops.reshape(field='image', shape=[32, 32, 3]))\n"
    "     .distribute(local_workers=1).batch(50))\n"
    "print('rows', sum(len(b['label']) for b in p), flush=True)\n"
    "sys.stdin.readline()\n"
    "print('rows', sum(len(b['label']) for b in p), flush=True)\n")


def test_ctrl_c_reaches_the_trainer_not_its_local_workers(cifar_dir):
    """Ctrl-C (or a notebook's interrupt) signals the trainer's process
    group: its local workers, in a group of their own, serve on."""
    import os
    import signal
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", _INTERRUPTED_CHILD, str(cifar_dir / "*.tfrecord")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        assert child.stdout.readline() == "rows 300\n"
        os.killpg(child.pid, signal.SIGINT)
        assert child.stdout.readline() == "interrupted\n"
        out, err = child.communicate("go\n", timeout=120)  # a hang guard, not a timing assertion
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert out == "rows 300\n"
    assert "SIGINT" not in err and "in its place" not in err


_STOPPED_CHILD = (
    "import signal, sys, numpy as np, sluice\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "p = sluice.arrays({'x': np.arange(100000, dtype=np.int64)}).batch(64).distribute(local_workers=1).repeat()\n"
    "it = iter(p)\n"
    "next(it)\n"
    "try:\n"
    "    print('ready', flush=True)\n"
    "    for _ in it:\n"
    "        pass\n"
    "except KeyboardInterrupt:\n"
    "    print('stopped', flush=True)\n")


def test_ctrl_c_in_a_distributed_pass_says_nothing_of_broken_streams():
    # The streams the interrupt cancelled were logged as broken, their
    # splits "running again", as if a worker had failed.
    import os
    import signal
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", _STOPPED_CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        assert child.stdout.readline() == "ready\n"
        os.kill(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=120)  # a hang guard, not a timing assertion
    finally:
        child.kill()
    assert child.returncode == 0 and out == "stopped\n", err
    assert "broke" not in err and "runs again" not in err, err


def test_distribute_builder_names_the_dispatcher_and_mode():
    p = sluice.arrays({"x": np.arange(4)}).distribute("host:1234", mode="parallel_epochs",
                                                      job_name="train", compression="zstd")
    node = json.loads(p.to_json())["nodes"][-1]["distribute"]
    assert node["dispatcher"] == "host:1234" and node["mode"] == "parallel_epochs"
    assert node["job_name"] == "train" and node["compression"] == "zstd"


def test_image_folder_decodes_crops_and_normalizes(tmp_path):
    import subprocess
    subprocess.run(["sluice", "make-data", "imagenet", "--out", str(tmp_path / "imgs"), "--count", "24",
                    "--classes", "3"], check=True, capture_output=True)
    pipe = (sluice.image_folder(tmp_path / "imgs")
            .map(ops.decode_random_resized_crop(size=[64]), ops.crop_mirror_normalize(dtype="float16"))
            .batch(8))
    batches = list(pipe)
    assert len(batches) == 3
    assert batches[0]["image"].shape == (8, 3, 64, 64) and batches[0]["image"].dtype == np.float16
    assert sorted(np.concatenate([b["label"] for b in batches]).tolist()) == [0] * 8 + [1] * 8 + [2] * 8
    assert np.isfinite(batches[0]["image"].astype(np.float32)).all()
    listing = tmp_path / "list.txt"
    listing.write_text("imgs/class_001/img_0000001.jpg 5\n")
    one = next(iter(sluice.file_list(listing).map(ops.decode_image(size=[32, 48])).batch(1)))
    assert one["image"].shape == (1, 32, 48, 3) and one["label"].tolist() == [5]


def test_an_image_folder_through_a_local_worker_yields_every_image_once_an_epoch(tmp_path):
    # One image a split: the worker gets a stream per core, each a ring, and
    # the batch after the distribute copies the images as they come.
    import subprocess
    subprocess.run(["sluice", "make-data", "imagenet", "--out", str(tmp_path / "imgs"), "--count", "61",
                    "--classes", "3"], check=True, capture_output=True)
    local = sluice.image_folder(tmp_path / "imgs").map(ops.decode_image(size=[32, 48]))
    distributed = local.distribute(local_workers=1).batch(16)
    by_label = lambda batches: sorted(
        (int(l), img.tobytes()) for b in batches for l, img in zip(b["label"], b["image"]))
    want = by_label(local.batch(16))
    assert len(want) == 61
    for _ in range(2):
        batches = list(distributed)
        assert [len(b["label"]) for b in batches] == [16, 16, 16, 13]
        assert by_label(batches) == want


def test_device_decode_stats_count_nothing_without_a_gpu_decode():
    stats = sluice.device_decode_stats()
    assert set(stats) == {"hardware", "cuda", "cpu", "decoder"}
    assert stats["hardware"] == stats["cuda"] == stats["cpu"] == 0 and stats["decoder"] == ""


def test_jpeg_bytes_in_tfrecord_features_decode_like_files(tmp_path):
    import subprocess
    for fmt in ("folder", "tfrecord"):
        subprocess.run(["sluice", "make-data", "imagenet", "--out", str(tmp_path / fmt), "--count", "12",
                        "--classes", "3", "--format", fmt, *(["--files", "2"] if fmt == "tfrecord" else [])],
                       check=True, capture_output=True)
    records = (sluice.tfrecord(str(tmp_path / "tfrecord" / "*.tfrecord"),
                               {"image/encoded": "bytes", "image/class/label": "int64"})
               .map(ops.decode_image(field="image/encoded", size=[40, 56]))
               .batch(12))
    files = sluice.image_folder(tmp_path / "folder").map(ops.decode_image(size=[40, 56])).batch(12)
    r, f = next(iter(records)), next(iter(files))
    assert r["image/encoded"].shape == (12, 40, 56, 3)
    # Same images, different orders (records by index, folders by class).
    by_label = lambda images, labels: sorted((int(l), bytes(i)) for i, l in zip(images, labels))
    assert by_label(r["image/encoded"], r["image/class/label"]) == by_label(f["image"], f["label"])


@pytest.mark.parametrize("source", ["arrays", "arrow_ipc", "parquet"])
def test_a_batch_written_in_place_changes_nothing_the_source_gives_again(tmp_path, source):
    # These sources hand out views of memory every epoch reads again (the
    # arrays, an IPC file's mapping): a training loop's in-place write must
    # reach neither the next epoch nor, for a mapped file, crash it.
    x = np.arange(64, dtype=np.int64)
    if source == "arrays":
        pipe = sluice.arrays({"x": x})
    else:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.ipc
        import pyarrow.parquet
        path = str(tmp_path / f"t.{source}")
        # A bytes column too: its rows are copied, not the row group's values.
        table = pa.table({"x": x, "b": [bytes([i]) * (i % 5 + 1) for i in range(64)]})
        if source == "parquet":
            pyarrow.parquet.write_table(table, path)
        else:
            with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
                w.write_table(table)
        pipe = getattr(sluice, source)(path, shuffle=False)  # each epoch in the same order
    for variant in (pipe, pipe.batch(8), pipe.batch(8).take(4).prefetch(2), pipe.batch(8).repeat(2)):
        want = np.concatenate([b["x"].reshape(-1) for b in variant])
        for _ in range(2):
            got = []
            for b in variant:
                got.append(b["x"].reshape(-1).copy())
                b["x"][...] = -1
            np.testing.assert_array_equal(np.concatenate(got), want)
        assert want[:8].tolist() == list(range(8))
    if source != "arrays":
        rows = [r["b"] for r in pipe]
        assert [bytes(r) for r in rows] == [bytes([i]) * (i % 5 + 1) for i in range(64)]


def test_threads_sharing_one_iterator_take_turns_each_sample_once():
    # Four threads reading one iterator (`for b in it` in each) split the
    # epoch between them; two at once in next() lost, repeated and crashed.
    pipe = (sluice.arrays({"x": np.arange(3000, dtype=np.int64)}, split_records=100)
            .shuffle(100).batch(16).with_options(seed=5))
    for _ in range(5):
        it = iter(pipe)
        got = [[] for _ in range(4)]

        def pull(mine):
            for b in it:
                mine.append(b["x"].copy())
                it.state()  # a position read between turns is as safe

        threads = [threading.Thread(target=pull, args=(mine,)) for mine in got]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(np.concatenate([x for mine in got for x in mine]).tolist()) == list(range(3000))


_FIRST_BATCHES_ON_TWO_THREADS = """
import threading
import numpy as np
import sluice
it = sluice.arrays({"x": np.arange(1000, dtype=np.int32)}).batch(10).iterate(0)
out = []


def pull():
    for b in it:
        out.append(b["x"].copy())


threads = [threading.Thread(target=pull) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sorted(np.concatenate(out).tolist()) == list(range(1000)))
"""


def test_threads_taking_a_fresh_processs_first_batches_at_once_do_not_deadlock():
    # The first batch made into numpy arrays looks numpy's API up; two
    # threads doing that at once deadlocked in 1 run of 2.
    import subprocess
    import sys
    for _ in range(8):  # each a fresh process: only the first batches race
        child = subprocess.run([sys.executable, "-c", _FIRST_BATCHES_ON_TWO_THREADS], capture_output=True, text=True,
                               timeout=120)  # a hang guard, not a timing assertion: it takes a second
        assert child.returncode == 0 and child.stdout.strip() == "True", child.stderr


def test_an_op_given_uncalled_to_map_is_named_at_once():
    with pytest.raises(TypeError, match=r"map takes ops.random_flip\(\.\.\.\), the op; ops.random_flip is the "
                                        r"function that makes it: call it"):
        sluice.arrays({"x": np.zeros((4, 2, 2, 3), np.uint8)}).map(ops.reshape(shape=[2, 2, 3]), ops.random_flip)


def test_threads_asking_for_a_pipelines_engine_at_once_get_one():
    pipe = sluice.arrays({"x": np.arange(100, dtype=np.int64)}).batch(10)
    start = threading.Barrier(8)
    engines = []

    def ask():
        start.wait()
        engines.append(pipe.engine)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(e) for e in engines}) == 1
    assert sum(len(b["x"]) for b in pipe) == 100
    assert pipe.memory()["peak_held"] > 0  # the engine that ran is the one memory() reads
