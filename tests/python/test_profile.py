"""pipeline.profile(), pipeline.materialize() and the torch adapter's consumer rate."""

import json
import time

import numpy as np
import pytest

import sluice
from sluice import ops


def _cifar(cifar_dir):
    return sluice.tfrecord(str(cifar_dir / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"})


def test_profile_names_a_costly_op_and_writes_trace_and_report(cifar_dir, tmp_path):
    pipe = (_cifar(cifar_dir)
            .map(ops.reshape(shape=[32, 32, 3]), ops.rescale(scale=1 / 255),
                 ops.gaussian_blur(ksize=31, sigma=6.0))
            .batch(16))
    result = pipe.profile(seconds=0.6, ablation=False, trace=tmp_path / "t.json", report=tmp_path / "r.html")
    assert result["verdict"]["bound"] == "compute"
    assert result["verdict"]["bottleneck"] == "gaussian_blur"
    blur = [op for op in result["ops"] if op["op"] == "gaussian_blur"][0]
    assert blur["cpu_share"] > 0.5 and blur["core_s_per_1k"] > 0
    assert result["samples_per_s"] > 0
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert any(e["ph"] == "X" and e["name"] == "gaussian_blur" for e in events)
    assert "gaussian_blur" in (tmp_path / "r.html").read_text()


def test_the_cpu_per_sample_counts_the_python_ops_processes(cifar_dir):
    import user_code
    pipe = (_cifar(cifar_dir).map(ops.python(user_code.burns_2ms_of_cpu, inputs="label"))
            .batch(10).repeat())
    result = pipe.profile(seconds=0.6, ablation=False)
    # Each sample ran 2 ms of CPU in an op's process, outside the engine's.
    assert result["cpu_s_per_sample"] >= 0.002 * 0.9, result["cpu_s_per_sample"]


def test_profile_with_a_slow_trainer_says_trainer_bound(cifar_dir):
    pipe = _cifar(cifar_dir).map(ops.reshape(shape=[32, 32, 3])).batch(8)
    result = pipe.profile(consumer_rate=300, seconds=0.6, ablation=False)
    assert result["verdict"]["bound"] == "trainer"
    assert "trainer-bound" in result["verdict"]["summary"]


def test_a_materialization_that_would_be_refused_is_not_offered(mnist_dir, tmp_path):
    # An IDX file's splits are its own: the records written could not be
    # read back in its order, so `materialize` refuses, and the profile
    # does not offer it.
    pipe = (sluice.mnist(str(mnist_dir / "train-images-idx3-ubyte"), str(mnist_dir / "train-labels-idx1-ubyte"))
            .map(ops.gaussian_blur(ksize=15, sigma=3.0)).batch(32))
    result = pipe.profile(seconds=0.4, ablation=False)
    assert result["levers"] and not any("materialize" in lever["action"] for lever in result["levers"]), result["levers"]
    with pytest.raises(sluice.SluiceError, match="the source's splits are its format's own"):
        pipe.materialize(tmp_path / "m")


def test_materialize_gives_the_same_batches(cifar_dir, tmp_path):
    pipe = (_cifar(cifar_dir)
            .map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3))
            .batch(32)
            .map(ops.rescale(scale=1 / 255), ops.random_flip())
            .with_options(seed=3))
    fast = pipe.materialize(tmp_path / "m")
    for a, b in zip(list(pipe), list(fast), strict=True):
        np.testing.assert_array_equal(a["image"], b["image"])
        np.testing.assert_array_equal(a["label"], b["label"])
    with pytest.raises(ValueError, match="nothing to materialize"):
        _cifar(cifar_dir).map(ops.reshape(shape=[32, 32, 3]), ops.random_flip()).materialize(tmp_path / "n")


def test_a_filter_or_shuffle_after_a_tfrecord_source_materializes_its_parse_only_with_more(cifar_dir, tmp_path):
    # The parse of the source's features is a map of its own here. Alone,
    # the records written are the records read (the rewritten pipeline
    # parses them again): refused, and not offered. With a costly op
    # after the parse and before the filter or shuffle, what is written is
    # that op's output, and the filter or shuffle stays after.
    for n, middle in enumerate([lambda p: p.filter(ops.keep_if(field="label", cmp="<", value=5)),
                                lambda p: p.shuffle(64)]):
        pipe = (middle(_cifar(cifar_dir)).map(ops.reshape(shape=[32, 32, 3]), ops.random_flip())
                .batch(10).with_options(seed=5))
        with pytest.raises(ValueError, match="only parse the source's records"):
            pipe.materialize(tmp_path / f"p{n}")
        assert not any("materialize" in lever["action"] for lever in pipe.profile(seconds=0.3, ablation=False)["levers"])
        pipe = (middle(_cifar(cifar_dir).map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3)))
                .map(ops.random_flip()).batch(10).with_options(seed=5))
        fast = pipe.materialize(tmp_path / f"m{n}")
        got, want = list(fast), list(pipe)
        assert len(got) == len(want) > 0
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a["image"], b["image"])
            np.testing.assert_array_equal(a["label"], b["label"])


def test_materializing_into_the_folder_of_its_source_files_is_refused_before_it_writes(cifar_dir, tmp_path):
    # Written as part-00000-of-00001.tfrecord over the source's file of that
    # name: the records replaced by their dilated selves, dilated again after.
    source = tmp_path / "part-00000-of-00001.tfrecord"
    source.write_bytes(sorted(cifar_dir.glob("*.tfrecord"))[0].read_bytes())
    before = source.read_bytes()
    pipe = (sluice.tfrecord(str(tmp_path / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"})
            .map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3)).batch(50))
    with pytest.raises(sluice.SluiceError, match=f"the output folder {tmp_path} holds the source's file {source}"):
        pipe.materialize(tmp_path)
    assert source.read_bytes() == before


def test_materializing_beside_source_files_a_glob_lists_is_refused(cifar_dir, tmp_path):
    # Under another name than a source file's: the parts would be listed by
    # the source's `*.tfrecord`, and the original pipeline read them too.
    data = tmp_path / "data"
    data.mkdir()
    for f in sorted(cifar_dir.glob("*.tfrecord")):
        (data / f.name).write_bytes(f.read_bytes())
    pipe = (sluice.tfrecord(str(data / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"})
            .map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3)).batch(50))
    before = sorted(p.name for p in data.iterdir())
    with pytest.raises(sluice.SluiceError, match="or be listed with it by the source's pattern; give another folder"):
        pipe.materialize(data)
    assert sorted(p.name for p in data.iterdir()) == before


def test_scalars_of_every_dtype_materialize_to_the_same_values(cifar_dir, tmp_path):
    # A uint8 or int32 scalar goes as an int64 feature and is cast back.
    for dtype in ("int32", "uint8"):
        prefix = (_cifar(cifar_dir)
                  .map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3), ops.cast(field="label", dtype=dtype))
                  .map(ops.random_flip()).batch(50))
        fast = prefix.materialize(tmp_path / dtype)
        for a, b in zip(list(prefix), list(fast), strict=True):
            assert a["label"].dtype == b["label"].dtype == np.dtype(dtype) and a["label"].shape == (50,)
            np.testing.assert_array_equal(a["label"], b["label"])
            np.testing.assert_array_equal(a["image"], b["image"])


def test_a_materialization_replaces_the_parts_of_one_from_more_files(cifar_dir, tmp_path):
    def dilated(files):
        return (sluice.tfrecord([str(f) for f in files], {"image": ("bytes", 3072), "label": "int64"})
                .map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3)).batch(50))
    files = sorted(cifar_dir.glob("*.tfrecord"))
    dilated(files[:3]).materialize(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").glob("part-*.tfrecord")) == [
        f"part-0000{i}-of-00003.tfrecord" for i in range(3)]
    dilated(files[:2]).materialize(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").glob("part-*")) == [
        f"part-0000{i}-of-00002.tfrecord{index}" for i in range(2) for index in ("", ".index")]


def test_a_materialization_that_fails_leaves_the_one_before_it_whole(cifar_dir, tmp_path):
    good = _cifar(cifar_dir).map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3)).batch(50)
    first = good.materialize(tmp_path / "m")
    want = [b["image"].copy() for b in first]
    # The same pipeline over a copy of the files whose last record is cut
    # short: it fails once most records are written.
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for f in sorted(cifar_dir.glob("*.tfrecord")):
        (damaged / f.name).write_bytes(f.read_bytes())
    last = sorted(damaged.glob("*.tfrecord"))[-1]
    last.write_bytes(last.read_bytes()[:-100])
    bad = (sluice.tfrecord(str(damaged / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"})
           .map(ops.reshape(shape=[32, 32, 3]), ops.grey_dilation(size=3)).batch(50))
    with pytest.raises(sluice.DataLossError, match="truncated"):
        bad.materialize(tmp_path / "m")
    again = sluice.Pipeline.from_json((tmp_path / "m" / "pipeline.json").read_text())
    for a, b in zip(want, [b["image"] for b in again], strict=True):
        np.testing.assert_array_equal(a, b)
    assert [p.name for p in (tmp_path / "m").iterdir() if p.name.startswith(".")] == []  # no staging left


def test_torch_adapter_measures_the_trainers_rate(mnist_dir):
    torch_mod = pytest.importorskip("sluice.torch")
    pipe = sluice.mnist(str(mnist_dir / "train-images-idx3-ubyte"),
                        str(mnist_dir / "train-labels-idx1-ubyte")).batch(100)
    loader = torch_mod.TorchIterable(pipe)
    assert loader.consumer_rate is None
    for _ in loader:
        time.sleep(0.01)  # the trainer's step: 100 samples per 10 ms at most
    assert 0 < loader.consumer_rate < 10_000


_PROFILING_CHILD = """
import signal
import sys
import threading
import time
signal.signal(signal.SIGINT, signal.default_int_handler)  # even where SIGINT is ignored
import numpy as np
import sluice
pipe = sluice.arrays({"x": np.arange(1000, dtype=np.int64)}).batch(10)
main = threading.main_thread().ident


def announce():  # once the main thread is inside the profile
    while sys._current_frames()[main].f_code.co_name != "profile":
        time.sleep(0.001)
    time.sleep(0.5)
    print("profiling", flush=True)


threading.Thread(target=announce, daemon=True).start()
try:
    pipe.profile(seconds=600)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_stops_a_profile():
    import signal
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", _PROFILING_CHILD], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "profiling"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)  # a profile of 600 s ran to its end, then raised
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert "interrupted" in out


def _jitter(sample):
    """Draws from numpy's global generator, which sluice cannot see."""
    return {"label": sample["label"] + np.random.randint(0, 1000)}


def test_a_python_op_is_materialized_only_when_declared_deterministic(cifar_dir, tmp_path):
    # Written once, a function drawing from np.random froze its augmentation:
    # epoch 0 and 1 gave the same labels, and the profile offered it.
    jittered = _cifar(cifar_dir).map(ops.python(_jitter, inputs="label")).batch(50)
    result = jittered.profile(seconds=0.4, ablation=False)
    assert not any("materialize" in lever["action"] for lever in result["levers"]), result["levers"]
    with pytest.raises(sluice.SluiceError, match=r"op 'python' runs a Python function, which may draw from a global "
                                                 r"generator .* ops.python\(\.\.\., deterministic=True\)"):
        jittered.materialize(tmp_path / "refused")
    assert not (tmp_path / "refused").exists() or not any((tmp_path / "refused").iterdir())
    doubled = (_cifar(cifar_dir).map(ops.python(lambda s: {"label": s["label"] * 2}, inputs="label",
                                                deterministic=True), ops.reshape(shape=[32, 32, 3]))
               .map(ops.random_flip()).batch(50))
    fast = doubled.materialize(tmp_path / "m")
    for epoch in (0, 1):
        for a, b in zip(doubled.iterate(epoch), fast.iterate(epoch), strict=True):
            np.testing.assert_array_equal(a["label"], b["label"])
            np.testing.assert_array_equal(a["image"], b["image"])
