"""The `python` op: a user's function run in a pool of Python processes,
checked against numpy computing the same, for determinism whatever the
process count, through a real worker process, and for every way the
user's code can fail."""

import gc
import os
import pickle
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import sluice
from sluice import ops

import user_code as fns
from conftest import start_server

ROWS = 300
IMAGES = np.random.default_rng(0).integers(0, 256, (ROWS, 8, 8, 3), dtype=np.uint8)


def _source():
    return sluice.arrays({"id": np.arange(ROWS, dtype=np.int64), "image": IMAGES}, split_records=50)


def _column(pipe, name):
    return np.concatenate([b[name] for b in pipe])


@pytest.mark.parametrize("processes", [1, 3])
def test_a_function_per_sample_gives_what_numpy_gives(processes):
    pipe = _source().map(ops.python(fns.invert, inputs="image", processes=processes)).batch(64)
    batches = list(pipe)
    assert np.array_equal(np.concatenate([b["image"] for b in batches]), 255 - IMAGES)
    assert np.array_equal(np.concatenate([b["id"] for b in batches]), np.arange(ROWS))  # the other column untouched


def test_a_plain_callable_in_map_runs_as_the_python_op():
    def brighten(sample):  # a function of the test's own, sent by value
        return {"id": sample["id"], "image": np.minimum(sample["image"].astype(np.int16) + 10, 255).astype(np.uint8)}
    batches = list(_source().map(brighten, ops.rescale(scale=0.5)).batch(64))
    want = np.minimum(IMAGES.astype(np.int16) + 10, 255).astype(np.float32) * 0.5
    assert np.array_equal(np.concatenate([b["image"] for b in batches]), want)
    assert np.array_equal(np.concatenate([b["id"] for b in batches]), np.arange(ROWS))
    for not_an_op in (3, "rescale"):
        with pytest.raises(TypeError, match="map takes ops from sluice.ops or Python callables, got"):
            _source().map(not_an_op)
    with pytest.raises(TypeError, match="filter takes a predicate op such as ops.keep_if"):
        _source().filter(lambda sample: sample["id"] < 5)


def _noise(processes, unordered=False, epoch=0):
    pipe = (_source().map(ops.python(fns.noise, inputs="id", outputs={"noise": ("float32", (4,))},
                                     processes=processes))
            .batch(32).with_options(seed=7, unordered=unordered))
    it = pipe.iterate(epoch=epoch) if epoch else pipe.iterate()
    by_id = {}
    for b in it:
        for i, n in zip(b["id"], b["noise"]):
            by_id[int(i)] = n.copy()
    return np.stack([by_id[i] for i in range(ROWS)])


def test_each_sample_draws_the_same_whatever_the_processes_and_order():
    one = _noise(1)
    assert np.array_equal(one, _noise(3))
    assert np.array_equal(one, _noise(2, unordered=True))
    assert len(np.unique(one[:, 0])) == ROWS  # a draw per sample, not per call
    assert not np.array_equal(one, _noise(1, epoch=1))  # and per epoch


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OPENCV_FOR_THREADS_NUM")


def test_the_processes_run_their_libraries_on_one_thread_unless_the_user_says(monkeypatch):
    def settings():
        pipe = (_source().map(ops.python(fns.thread_settings, inputs="id", outputs={"threads": ("int64", (4,))}))
                .batch(ROWS))
        return next(iter(pipe))["threads"][0].tolist()
    for name in _THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert settings() == [1, 1, 1, 1]
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert settings() == [3, 1, 1, 1]


def test_a_batched_function_gets_whole_batches():
    pipe = (_source().batch(64)
            .map(ops.python(fns.batch_mean, batched=True, inputs="image", outputs={"mean": ("float32", ())})))
    means = _column(pipe, "mean")
    np.testing.assert_allclose(means, IMAGES.reshape(ROWS, -1).mean(axis=1), rtol=1e-6)


def test_bytes_columns_arrive_as_uint8_arrays(cifar_dir):
    files = str(cifar_dir / "*.tfrecord")
    native = (sluice.tfrecord(files, {"image": ("bytes", 3072), "label": "int64"})
              .map(ops.decode_raw(dtype="uint8"), ops.reshape(shape=[32, 32, 3])).batch(50))
    mine = (sluice.tfrecord(files, {"image": "bytes", "label": "int64"})
            .map(ops.python(fns.decode, inputs="image", outputs={"image": ("uint8", (32, 32, 3))})).batch(50))
    assert np.array_equal(_column(mine, "image"), _column(native, "image"))


def test_through_a_worker_process_the_output_is_the_same():
    here = _noise(2)
    pipe = (_source().map(ops.python(fns.noise, inputs="id", outputs={"noise": ("float32", (4,))}, processes=2))
            .distribute(local_workers=1).batch(32).with_options(seed=7))
    by_id = {int(i): n for b in pipe for i, n in zip(b["id"], b["noise"])}
    assert np.array_equal(np.stack([by_id[i] for i in range(ROWS)]), here)


_STALLED = np.arange(64, dtype=np.int64)


def _run_stalled(tmp_path, monkeypatch, split_records, parallelism=0, threads=None):
    """Runs user_code.stalls_on_0 over ids 0..63 in 2 processes, sample 0
    waiting for 40 samples run by the other process; each sample's
    (pid, id) as the files it left."""
    monkeypatch.setenv("STALL_DIR", str(tmp_path))
    monkeypatch.setenv("STALL_FOR", "40")
    pipe = sluice.arrays({"id": _STALLED}, split_records=split_records)
    pipe = pipe.map(ops.python(fns.stalls_on_0, processes=2), parallelism=parallelism).batch(64)
    assert np.array_equal(_column(pipe.with_options(threads=threads), "id"), _STALLED)
    return [tuple(name.split("-")) for name in os.listdir(tmp_path)]


def test_a_process_held_up_by_a_sample_leaves_the_rest_of_the_tile_to_the_others(tmp_path, monkeypatch):
    # Sample 0 holds its process until the other has run 40 of the 64: a
    # tile split evenly between the two would leave that one 32, and so
    # would a runner waiting on sample 0 that missed the other process
    # coming free from another runner's tile (sample 0 then fails, after 30 s).
    # Two runners, not the autotuner's choice: with one, the tile after
    # sample 0's waits for it, whatever the processes do.
    runs = _run_stalled(tmp_path, monkeypatch, split_records=64, parallelism=2)
    assert sorted(int(sample) for _, sample in runs) == list(range(64))
    held = next(pid for pid, sample in runs if sample == "0")
    assert sum(pid != held for pid, _ in runs) >= 40, runs


def test_a_thread_waiting_on_its_python_processes_lends_its_core_to_the_engine(tmp_path, monkeypatch):
    # One core for the engine, two runners: sample 0 holds the first tile's
    # thread until the other process ran 40 samples, which needs the second
    # tile, which needs a core the waiting thread must have lent.
    assert len(_run_stalled(tmp_path, monkeypatch, split_records=32, parallelism=2, threads=1)) == 64


def _error(fn, **kwargs):
    pipe = _source().map(ops.python(fn, processes=2, **kwargs)).batch(64)
    with pytest.raises(sluice.SluiceError) as e:
        list(pipe)
    return str(e.value)


def test_an_exception_names_the_sample_and_carries_the_traceback():
    message = _error(fns.fails_on_37, inputs="id")
    assert "python op 'user_code:fails_on_37' failed on record 37 of <arrays>" in message
    assert "ValueError: id 37 is cursed" in message and "user_code.py" in message


def test_an_outputs_declaration_that_declares_nothing_or_no_spec_is_refused():
    with pytest.raises(ValueError, match=r"outputs=\{\} declares no column"):
        ops.python(fns.invert, outputs={})
    with pytest.raises(TypeError, match=r"outputs must be a dict \{name: \(dtype, shape\)\}.*got 'label'"):
        ops.python(fns.invert, outputs="label")
    with pytest.raises(ValueError, match=r"outputs\['image'\] must be \(dtype, shape\).*got 'uint8'"):
        ops.python(fns.invert, outputs={"image": "uint8"})
    with pytest.raises(ValueError, match=r"outputs\['ids'\] has a dimension None: .* fixed shapes"):
        ops.python(fns.invert, outputs={"ids": ("int32", (None,))})


def test_a_wrong_output_names_the_column_and_both_specs():
    assert "output 'image' is float32[8, 8, 3], declared uint8[8, 8, 3]" in _error(fns.wrong_dtype, inputs="image")
    assert ("output 'image' is None (the function returned None for it), declared uint8[8, 8, 3]"
            in _error(fns.image_of_none, inputs="image"))
    message = _error(fns.forgets_image, inputs="image")
    assert "has no 'image' (it has ['picture']); declared: image: uint8[8, 8, 3]" in message


def test_a_returned_column_the_outputs_do_not_declare_is_an_error_not_dropped():
    assert ("the function returned ['mask'], which its outputs do not declare and would be lost"
            in _error(fns.adds_undeclared_mask, inputs="image"))
    # The sample passed back whole: its undeclared inputs stay as they were.
    pipe = _source().map(ops.python(fns.inverts_in_the_whole_sample, outputs={"image": None})).batch(64)
    np.testing.assert_array_equal(_column(pipe, "image"), 255 - IMAGES)
    np.testing.assert_array_equal(_column(pipe, "id"), np.arange(ROWS))


def test_an_iterator_that_failed_stays_failed_and_keeps_its_position():
    # A next() after a caught error went on past the failed rows: a batch
    # stitched from two ranges, the rows between them never delivered.
    pipe = _source().map(ops.python(fns.fails_on_37, inputs="id", processes=2)).batch(8)
    it = pipe.iterate()
    delivered = np.concatenate([next(it)["id"] for _ in range(4)])
    with pytest.raises(sluice.SluiceError) as first:
        next(it)
    state = it.state()
    for _ in range(3):
        with pytest.raises(sluice.SluiceError) as again:
            next(it)
        assert str(again.value) == str(first.value)
    np.testing.assert_array_equal(delivered, np.arange(32))
    with pytest.raises(sluice.SluiceError) as resumed:  # from the failed batch, not past it
        next(pipe.iterate(state=state))
    assert "failed on record 37" in str(resumed.value)


@pytest.mark.parametrize("fn, how", [(fns.exits_on_37, "exited with status 3"),
                                     (fns.killed_on_37, "was killed by signal 9")])
def test_a_process_that_dies_is_an_error_naming_the_sample(fn, how):
    message = _error(fn, inputs="id")
    assert how in message and "running record 37 of <arrays>" in message, message


def test_a_process_that_dies_before_its_code_runs_says_why(tmp_path, monkeypatch):
    (tmp_path / "numpy").mkdir()  # what the op's interpreter finds first: a broken numpy
    (tmp_path / "numpy" / "__init__.py").write_text("raise ImportError('numpy is broken on this host')\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the op's processes get this process's import path
    message = _error(fns.invert, inputs="image")
    assert "exited with status 1; it printed" in message, message
    assert "ImportError: numpy is broken on this host" in message, message


def test_a_trainer_with_a_sigchld_handler_still_learns_why_each_process_died(tmp_path, monkeypatch):
    # PyTorch's DataLoader installs a SIGCHLD handler in the trainer, and
    # Python's handlers interrupt system calls: any child's exit could cut
    # the op's wait for its dead process short, leaving a zombie and "is gone".
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "__init__.py").write_text("raise ImportError('numpy is broken on this host')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    previous = signal.signal(signal.SIGCHLD, lambda *_: None)
    churning = threading.Event()
    churning.set()

    def churn():  # other children of the trainer, exiting all along
        while churning.is_set():
            subprocess.run(["true"])

    churner = threading.Thread(target=churn)
    churner.start()
    try:
        messages = [_error(fns.invert, inputs="image") for _ in range(50)]
    finally:
        churning.clear()
        churner.join()
        signal.signal(signal.SIGCHLD, previous)
    assert all("exited with status 1; it printed" in m for m in messages), messages
    children = subprocess.run(["ps", "--ppid", str(os.getpid()), "-o", "stat=,args="], capture_output=True,
                              text=True).stdout
    assert not [line for line in children.splitlines() if line.startswith("Z") and "[python" in line], children


def test_what_a_process_prints_before_its_code_runs_reaches_stderr_and_is_no_later_deaths_cause(
        tmp_path, monkeypatch, capfd):
    (tmp_path / "sitecustomize.py").write_text("import sys; print('words at start-up', file=sys.stderr)\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the op's processes get this process's import path
    message = _error(fns.exits_on_37, inputs="id")
    assert "exited with status 3" in message and "words at start-up" not in message, message
    assert "words at start-up" in capfd.readouterr().err


def test_no_process_is_left_behind():
    for fn in (fns.invert, fns.killed_on_37):
        pipe = _source().map(ops.python(fn, inputs="image" if fn is fns.invert else "id", processes=3)).batch(64)
        try:
            list(pipe)
        except sluice.SluiceError:
            pass
        del pipe
    gc.collect()  # earlier tests' pipelines, held by their exceptions' tracebacks
    children = subprocess.run(["ps", "--ppid", str(os.getpid()), "-o", "pid=,stat=,args="], capture_output=True,
                              text=True).stdout
    # Alive, or dead and never reaped (a zombie shows its interpreter's name,
    # not its arguments). Other tests' children (their `sluice` servers) are
    # not this op's.
    zombies = [line for line in children.splitlines() if " Z" in line and "[python" in line]
    assert "sluice._python_worker" not in children and not zombies, children


def test_a_function_that_cannot_be_imported_fails_before_the_first_batch():
    pipe = _source().map(ops.python("no_such_module:fn")).batch(64)
    with pytest.raises(sluice.SluiceError, match="(?s)cannot load no_such_module:fn.*ModuleNotFoundError"):
        pipe.engine  # noqa: B018 (compiling starts the processes, which import it)


# Prints "first" after the first batch, then reads on with the function
# named argv[2] (or from the dataset class of user_code named argv[3]);
# argv[1] is the directory of user_code.py. It sets Python's own SIGINT
# handler, as in a terminal: a runner started in the background (`cmd &`)
# passes SIGINT on ignored, and Python then leaves it ignored.
_TRAINER = r"""
import signal
import sys
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
sys.path.insert(0, sys.argv[1])
import sluice
from sluice import ops
import user_code
if sys.argv[2] == "dataset":
    pipe = sluice.from_dataset(getattr(user_code, sys.argv[3])(), processes=2).batch(8)
else:
    fn = getattr(user_code, sys.argv[2])
    pipe = sluice.arrays({"id": np.arange(100000, dtype=np.int64)}).map(ops.python(fn, processes=2)).batch(8)
for n, batch in enumerate(pipe):
    if n == 0:
        print("first", flush=True)
"""


@pytest.mark.parametrize("function", ["slow", "hangs_at_1000", "dataset HangsAt1000"])
def test_ctrl_c_stops_the_trainer_and_its_python_processes(function, tmp_path):
    import signal
    import sys
    import time

    marker = tmp_path / "stuck"
    trainer = subprocess.Popen([sys.executable, "-c", _TRAINER, os.path.dirname(os.path.abspath(__file__)),
                                *function.split()],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, SLUICE_TEST_MARKER=str(marker)))
    assert trainer.stdout.readline().strip() == "first"
    deadline = time.monotonic() + 60
    while "angs" in function and not marker.exists():  # the user's code is stuck now
        assert time.monotonic() < deadline, "the function never reached its hang"
        time.sleep(0.05)
    trainer.send_signal(signal.SIGINT)
    _, err = trainer.communicate(timeout=60)  # a hang guard: it stops within a sample or two
    assert trainer.returncode != 0 and "KeyboardInterrupt" in err, err
    assert "BrokenPipeError" not in err  # the op's processes, cut off mid-call, go quietly
    deadline = time.monotonic() + 30
    # The stuck process (its pid in the marker), or any of the op's.
    stuck = f"/proc/{marker.read_text()}" if marker.exists() else None
    while (os.path.exists(stuck) if stuck else
           f"user_code:{function}" in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout):
        assert time.monotonic() < deadline, "a Python process of the op outlived the trainer"
        time.sleep(0.1)


def test_the_pool_replaces_a_process_that_died():
    pipe = _source().map(ops.python(fns.killed_on_37, inputs="id", processes=1)).batch(64)
    with pytest.raises(sluice.SluiceError, match="killed by signal 9"):
        list(pipe)
    # The next epoch runs on a new process (which dies at 37 again: the
    # error proves a process ran it, not a hang or a dead pool).
    with pytest.raises(sluice.SluiceError, match="killed by signal 9"):
        list(pipe)
    ok = _source().map(ops.python(fns.invert, inputs="image", processes=1)).batch(64)
    assert np.array_equal(_column(ok, "image"), 255 - IMAGES)


def test_the_installed_command_runs_a_workers_python_ops_in_its_own_interpreter(tmp_path):
    """Started by its full path, without this environment's bin on PATH
    (as a service manager starts it): the ops run in the interpreter that
    holds the package, not in a `python3` found on PATH."""
    command = os.path.join(os.path.dirname(sys.executable), "sluice")
    env = {k: v for k, v in os.environ.items() if k not in ("SLUICE_PYTHON", "SLUICE_PYTHONPATH", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if os.path.abspath(p) != os.path.dirname(sys.executable))
    servers = []
    try:
        servers.append(start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0"], command, env=env))
        address = f"127.0.0.1:{servers[0][1]}"
        servers.append(start_server(["worker", "--dispatcher", address, "--host", "127.0.0.1"], command,
                                    env=env, cwd=tmp_path))
        pipe = _source().map(lambda s: {"id": s["id"], "image": 255 - s["image"]}).distribute(address).batch(300)
        got = next(iter(pipe))
        order = np.argsort(got["id"])
        assert np.array_equal(got["image"][order], 255 - IMAGES)
    finally:
        for process, _ in servers:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def test_a_worker_whose_interpreter_has_no_sluice_says_what_to_set(tmp_path):
    bare = tmp_path / "python-without-packages"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')  # no site-packages: no sluice
    bare.chmod(0o755)
    env = dict(os.environ, SLUICE_PYTHON=str(bare))
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0"], env=env)
    worker, _ = start_server(["worker", "--dispatcher", f"127.0.0.1:{port}", "--host", "127.0.0.1"], env=env)
    try:
        pipe = _source().map(lambda s: {"id": s["id"], "image": 255 - s["image"]}).distribute(f"127.0.0.1:{port}")
        with pytest.raises(sluice.SluiceError) as raised:
            next(iter(pipe.batch(10)))
        message = str(raised.value)
        assert "No module named 'sluice'" in message, message
        assert "(that interpreter has no sluice package: set SLUICE_PYTHON to one that has)" in message, message
    finally:
        for process in (worker, dispatcher):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


_READ_BACK = """
import pickle, sys
import sluice
data = open(sys.argv[2], "rb").read()
pipe = pickle.loads(data) if sys.argv[1] == "pickle" else sluice.Pipeline.from_json(data.decode())
print(sorted(int(v) for v in next(iter(pipe))["id"]))
"""


@pytest.mark.parametrize("form", ["pickle", "json"])
def test_a_pipeline_read_back_in_a_fresh_process_runs_its_ops_in_that_interpreter(tmp_path, form):
    """Unpickled (in a Ray task) or read from JSON, with nothing set in the
    environment: its python ops run in the interpreter that made the
    engine, not in a `python3` found first on PATH, which has no sluice."""
    bare = tmp_path / "bin" / "python3"
    bare.parent.mkdir()
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    bare.chmod(0o755)
    module = tmp_path / "negate.py"
    module.write_text("def negate(s):\n    return {'id': -s['id']}\n")
    pipe = sluice.arrays({"id": np.arange(10, dtype=np.int64)}).map(ops.python(f"{module}:negate")).batch(10)
    saved = tmp_path / "pipe"
    saved.write_bytes(pickle.dumps(pipe) if form == "pickle" else pipe.to_json().encode())
    env = {k: v for k, v in os.environ.items() if k not in ("SLUICE_PYTHON", "SLUICE_PYTHONPATH")}
    env["PATH"] = os.pathsep.join([str(bare.parent), env["PATH"]])
    ran = subprocess.run([sys.executable, "-c", _READ_BACK, form, str(saved)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == str(list(range(-9, 1))), ran.stdout


@pytest.fixture
def worker_without_user_code(tmp_path):
    """A dispatcher that could import user_code and a worker that cannot:
    the code must be loaded where it runs, by the worker."""
    here = os.path.dirname(fns.__file__)
    path = [p for p in sys.path if p and os.path.abspath(p) != here]
    common = dict(os.environ, SLUICE_PYTHON=sys.executable, PYTHONPATH="")
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0"],
                                    env=dict(common, SLUICE_PYTHONPATH=os.pathsep.join([here, *path])))
    worker, _ = start_server(["worker", "--dispatcher", f"127.0.0.1:{port}", "--host", "127.0.0.1"],
                             env=dict(common, SLUICE_PYTHONPATH=os.pathsep.join(path)), cwd=tmp_path)
    yield f"127.0.0.1:{port}"
    for process in (worker, dispatcher):
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.parametrize("pipe", [
    lambda: _source().map(ops.python(fns.invert, inputs="image")),
    lambda: sluice.from_dataset("user_code:make_squares", names=("image", "label")),
], ids=["op", "dataset"])
def test_code_a_worker_cannot_import_fails_the_registration_naming_it(worker_without_user_code, pipe):
    with pytest.raises(sluice.SluiceError, match="(?s)pipeline rejected.*cannot load user_code:.*"
                                                 "ModuleNotFoundError: No module named 'user_code'"):
        next(iter(pipe().distribute(worker_without_user_code).batch(10)))


@pytest.mark.parametrize("how, message", [
    (dict(inputs=["a,b"]), r"column 'a,b' in inputs holds ','"),
    (dict(inputs=[" g "]), r"column ' g ' in inputs is empty or starts or ends with a space"),
    (dict(outputs={"c:d": None}), r"column 'c:d' in outputs holds ':'"),
    (dict(outputs={"e;f": ("int64", [])}), r"column 'e;f' in outputs holds ';'"),
    (dict(outputs={"x": ("int64", 3)}), r"outputs\['x'\]'s shape is a list of dims, e.g. \[3\]"),
])
def test_column_names_ops_python_cannot_carry_are_named(how, message):
    # Joined into its attrs by ',' and ';', they split into other names.
    with pytest.raises(ValueError, match=message):
        ops.python(lambda s: s, **how)
