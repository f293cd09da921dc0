"""Checkpoint and resume through the Python front: an epoch cut after k
elements, its state saved, and the rest resumed in a fresh process (another
thread count) equals the uninterrupted epoch's rest byte for byte."""

import hashlib
import subprocess
import sys

import numpy as np
import pytest

import sluice
from sluice import ops

RESUME = r"""
import hashlib, sys
import sluice
pipe = sluice.Pipeline.from_json(open(sys.argv[1]).read()).with_options(threads=int(sys.argv[3]))
h = hashlib.sha256()
n = 0
for b in pipe.iterate(state=open(sys.argv[2], "rb").read()):
    for k in sorted(b):
        h.update(b[k].tobytes())
    n += 1
print(n, h.hexdigest())
"""


def pipeline(shuffle=0):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (300, 6, 5, 3), np.uint8)
    pipe = sluice.arrays({"image": images, "label": np.arange(300) % 7}, split_records=40)
    if shuffle:
        pipe = pipe.shuffle(shuffle)
    return (pipe.map(ops.random_flip(mode="horizontal"), ops.color_jitter(brightness=0.4))
            .filter(ops.keep_if(field="label", cmp="!=", value=2))
            .batch(16)
            .prefetch(2)
            .with_options(seed=3, threads=2))


def digest(elements):
    h = hashlib.sha256()
    for b in elements:
        for k in sorted(b):
            h.update(b[k].tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("shuffle", [0, 100])
@pytest.mark.parametrize("cut", [0, 1, 5, 13])
def test_the_rest_resumed_in_a_fresh_process_equals_the_uninterrupted_rest(tmp_path, cut, shuffle):
    pipe = pipeline(shuffle)
    whole = [{k: v.copy() for k, v in b.items()} for b in pipe.iterate(4)]
    it = pipe.iterate(4)
    for _ in range(cut):
        next(it)
    state = it.state()
    assert len(state) < 200  # a position, not samples
    (tmp_path / "pipe.json").write_text(pipe.to_json())
    (tmp_path / "state").write_bytes(state)
    out = subprocess.run([sys.executable, "-c", RESUME, str(tmp_path / "pipe.json"), str(tmp_path / "state"), "1"],
                         check=True, capture_output=True, text=True).stdout.split()
    assert int(out[0]) == len(whole) - cut
    assert out[1] == digest(whole[cut:])


def test_a_state_is_checked_before_anything_runs():
    pipe = pipeline()
    it = pipe.iterate(0)
    next(it)
    state = it.state()
    with pytest.raises(ValueError, match="not both"):
        pipe.iterate(1, state=state)
    with pytest.raises(sluice.InvalidArgumentError, match="not a sluice iterator state"):
        pipe.iterate(state=b"garbage")
    # Cut short at any byte (a checkpoint written half-way): refused, never
    # read as a position that would replay or skip samples.
    for n in range(len(state)):
        with pytest.raises(sluice.InvalidArgumentError, match="not a sluice iterator state"):
            pipe.iterate(state=state[:n])
    with pytest.raises(sluice.InvalidArgumentError, match="pipeline_fingerprint"):
        pipe.with_options(seed=4).iterate(state=state)
    # Thread count and prefetch depth shape the run, not the output: the state fits.
    assert len(list(pipe.with_options(threads=1).iterate(state=state))) > 0


def rows(batches):
    """Each row's bytes (every column), in the order delivered."""
    out = []
    for b in batches:
        keys = sorted(b)
        for i in range(len(b[keys[0]])):
            out.append(b"".join(b[k][i].tobytes() for k in keys))
    return out


@pytest.mark.parametrize("cut", [1, 4, 9])
def test_a_repeated_take_resumes_in_a_fresh_process(tmp_path, cut):
    # Two of the repeat's epochs and part of a third, cut in the second.
    pipe = pipeline().repeat().take(40)
    whole = [{k: v.copy() for k, v in b.items()} for b in pipe.iterate(2)]
    assert len(whole) == 40
    it = pipe.iterate(2)
    for _ in range(cut + 16):
        next(it)
    (tmp_path / "pipe.json").write_text(pipe.to_json())
    (tmp_path / "state").write_bytes(it.state())
    out = subprocess.run([sys.executable, "-c", RESUME, str(tmp_path / "pipe.json"), str(tmp_path / "state"), "1"],
                         check=True, capture_output=True, text=True).stdout.split()
    assert int(out[0]) == 40 - cut - 16
    assert out[1] == digest(whole[cut + 16:])


def test_an_unordered_epoch_resumes_with_exactly_the_rows_left():
    pipe = pipeline(shuffle=50).with_options(unordered=True)
    whole = sorted(rows(pipe.iterate(1)))
    it = pipe.iterate(1)
    first = rows(next(it) for _ in range(5))
    state = it.state()
    rest = rows(pipe.with_options(threads=1).iterate(state=state))
    assert sorted(first + rest) == whole  # the same multiset: nothing twice, nothing lost


def test_the_pass_after_a_resumed_epoch_is_the_next_epoch():
    pipe = sluice.arrays({"id": np.arange(100, dtype=np.int64)}).shuffle(30).batch(10)
    first = pipe.iterate(3)
    for _ in range(4):
        next(first)
    state = first.state()
    again = sluice.arrays({"id": np.arange(100, dtype=np.int64)}).shuffle(30).batch(10)
    assert len(list(again.iterate(state=state))) == 6
    assert sluice._sluice.state_epoch(state) == 3
    # Not epoch 0 again: a training loop that resumed goes on with epoch 4.
    following = np.concatenate([b["id"] for b in again])
    np.testing.assert_array_equal(following, np.concatenate([b["id"] for b in pipe.iterate(4)]))
    assert sluice._sluice.state_epoch(b"not a state") is None


def test_a_state_saved_before_the_glob_matched_another_file_is_refused(tmp_path, cifar_dir):
    import shutil
    files = sorted(cifar_dir.glob("*.tfrecord"))
    for f in files[1:]:
        shutil.copy(f, tmp_path / f.name)
    features = {"image": ("bytes", 3072), "label": "int64"}
    pipe = sluice.tfrecord(str(tmp_path / "*.tfrecord"), features).batch(10)
    it = pipe.iterate(0)
    next(it)
    state = it.state()
    # The same files resume; a file the glob now also matches (sorting
    # first) would shift every split: some samples twice, others never.
    assert len(list(sluice.tfrecord(str(tmp_path / "*.tfrecord"), features).batch(10).iterate(state=state))) > 0
    shutil.copy(files[0], tmp_path / files[0].name)
    grown = sluice.tfrecord(str(tmp_path / "*.tfrecord"), features).batch(10)
    with pytest.raises(sluice.InvalidArgumentError, match=r"saved over another listing of the source's files "
                                                          r"\(2 files, 2 splits, [0-9a-f]{16}; this pipeline's: 3 "
                                                          r"files, 3 splits"):
        grown.iterate(state=state)
