"""A process forked from one that used sluice (a DataLoader's workers, a
multiprocessing pool): the child makes its own engine, never uses or stops
the parent's, and is told plainly what cannot cross the fork."""

import gc
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sluice
from sluice import ops

import user_code as fns

ROWS = 4000


def _tripled():
    """y = 3x by a python op: a row with another row's y is wrong data."""
    return (sluice.arrays({"x": np.arange(ROWS, dtype=np.int64), "y": np.zeros(ROWS, dtype=np.int64)})
            .map(ops.python(fns.triples_x, inputs=["x", "y"], outputs={"y": None})).batch(50))


def _count(pipe):
    xs, wrong = [], 0
    for b in pipe:
        xs += b["x"].tolist()
        wrong += int((b["y"] != 3 * b["x"]).sum())
    return {"rows": len(xs), "distinct": len(set(xs)), "wrong": wrong}


def _in_child(fn):
    """fn() in a forked child, its result (or its error's words) back as
    JSON, while the parent goes on; returns a function that waits for it."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 0
        signal.alarm(120)  # a child that hangs fails the test, not the run
        try:
            os.close(read)
            try:
                out = {"result": fn()}
            except Exception as e:  # noqa: BLE001 (its words go back to the test)
                out = {"error": f"{type(e).__name__}: {e}"}
            os.write(write, json.dumps(out).encode())
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write)

    def wait():
        with os.fdopen(read) as f:
            text = f.read()
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        return json.loads(text)
    return wait


def test_a_child_and_its_parent_each_get_every_row_right_from_a_pipeline_used_before_the_fork():
    # They shared the parent's python op processes: 2,000-3,000 rows of
    # 4,000 came with the other process's y, in the child and the parent.
    pipe = _tripled()
    assert _count(pipe)["wrong"] == 0
    child = _in_child(lambda: _count(pipe))
    here = _count(pipe)
    there = child()
    expected = {"rows": ROWS, "distinct": ROWS, "wrong": 0}
    assert here == expected and there == {"result": expected}, (here, there)


def test_an_iterator_continued_after_a_fork_is_an_error_naming_both_processes():
    # It hung: its threads had stayed in the parent (Ctrl-C did not stop it).
    pipe = sluice.arrays({"x": np.arange(ROWS, dtype=np.int64)}).map(ops.cast(field="x", dtype="float32")).batch(50)
    it = iter(pipe)
    first = next(it)["x"]
    child = _in_child(lambda: next(it)["x"].tolist())
    rest = np.concatenate([first] + [b["x"] for b in it])
    error = child()["error"]
    assert f"this iterator was started in process {os.getpid()}, which this process" in error, error
    assert "Start a new pass over the pipeline in this process" in error
    np.testing.assert_array_equal(rest, np.arange(ROWS))  # the parent's pass unharmed


def test_a_child_forked_after_the_service_started_is_refused_it_and_the_parent_carries_on():
    # The child's gRPC shared the parent's polling engine: the parent's
    # server crashed (SIGSEGV) as soon as the child started its own.
    def distributed():
        return sluice.arrays({"x": np.arange(2000, dtype=np.int64)}).batch(50).distribute(local_workers=1)

    pipe = distributed()
    assert sum(len(b["x"]) for b in pipe) == 2000
    error = _in_child(lambda: sum(len(b["x"]) for b in distributed()))()["error"]
    assert f"gRPC was started in process {os.getpid()}, which this process" in error, error
    assert "cannot run on both sides of a fork" in error and "spawn" in error
    assert sum(len(b["x"]) for b in pipe) == 2000


def test_a_pipeline_pickles_after_its_engine_was_made():
    # It pickled only until first used: len() before a spawn start failed.
    pipe = _tripled()
    before = _count(pipe)
    again = pickle.loads(pickle.dumps(pipe))
    assert _count(again) == before == {"rows": ROWS, "distinct": ROWS, "wrong": 0}


def test_a_copy_of_a_dataset_pipeline_leaves_the_dataset_to_the_original():
    # Each unpickled copy, and each forked child at exit, removed the file
    # the dataset's processes load: the original's next engine failed.
    pytest.importorskip("torch")
    pipe = sluice.from_dataset(fns.Squares(40), shuffle=False)
    assert len(list(pipe.batch(8))) == 5
    copy = pickle.loads(pickle.dumps(pipe))
    del copy
    gc.collect()
    assert _in_child(lambda: len(list(pipe.batch(10))))() == {"result": 4}
    labels = np.concatenate([b["1"] for b in pipe.batch(20)])  # a new engine, after both (tuple items: "0", "1")
    np.testing.assert_array_equal(labels, np.arange(40))


_LOADER_WORKERS = textwrap.dedent("""
    import numpy as np, sluice, torch
    class Wrapped(torch.utils.data.IterableDataset):
        def __iter__(self):
            yield from sluice.arrays({"x": np.arange(100, dtype=np.int64)}).batch(10)
    xs = [v for b in torch.utils.data.DataLoader(Wrapped(), batch_size=None, num_workers=2) for v in b["x"].tolist()]
    print(len(xs), len(set(xs)))
""")


def test_a_pipeline_every_loader_worker_reads_whole_warns_of_the_repeats():
    pytest.importorskip("torch")
    run = subprocess.run([sys.executable, "-c", _LOADER_WORKERS], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["200", "100"]  # what the user wrote asks for it
    assert "iterated in DataLoader worker 0 of 2 and has no shard" in run.stderr, run.stderr
    assert "every sample 2 times an epoch" in run.stderr and "<string>" in run.stderr  # the user's line


_SPAWNED = """
import numpy as np
import torch.multiprocessing as mp
import sluice
from sluice import ops

class Numbers:  # defined in the script, which the spawned child runs as __mp_main__
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return {"id": np.int64(i)}

def doubled(sample):
    return {"id": sample["id"] * 2}

def run(rank):
    rows = sorted(int(v) for b in sluice.from_dataset(Numbers(), processes=1).batch(4) for v in b["id"])
    pipe = sluice.arrays({"id": np.arange(8, dtype=np.int64)}).map(ops.python(doubled, inputs="id")).batch(4)
    print("child", rows, [int(v) for b in pipe for v in b["id"]], flush=True)

if __name__ == "__main__":
    mp.spawn(run, nprocs=1)
"""


def test_a_dataset_and_a_transform_defined_in_a_script_run_in_its_spawned_processes(tmp_path):
    # There the script is the module __mp_main__, which cloudpickle sent by
    # reference: sluice's processes could not import it.
    (tmp_path / "job.py").write_text(_SPAWNED)
    run = subprocess.run([sys.executable, str(tmp_path / "job.py")], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "child [0, 1, 2, 3, 4, 5, 6, 7] [0, 2, 4, 6, 8, 10, 12, 14]" in run.stdout, run.stderr[-3000:]
