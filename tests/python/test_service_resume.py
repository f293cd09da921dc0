"""A trainer reading through a real dispatcher and workers, killed -9 after a
checkpoint and restarted from it: it gets exactly the samples its checkpoint
had not counted, with the augmentation an uninterrupted run gives them, also
when the dispatcher restarts from its work dir in between."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import start_server

ROWS = 3000

# argv: dispatcher address, state file, "first", "checkpoint", "resume",
# "resume slowly" or "whole". Prints each
# batch's ids and a checksum of its images as it takes them; the first run
# saves its state after 10 batches (as a trainer's checkpoint would:
# written aside, synced, renamed) and says "saved", then reads on slowly
# until it is killed; "checkpoint" saves it likewise and exits.
_TRAINER = r"""
import os, sys, time
import numpy as np
import sluice
from sluice import ops
images = np.arange(%d * 8 * 8 * 3, dtype=np.int64).reshape(-1, 8, 8, 3).astype(np.uint8)
pipe = (sluice.arrays({"id": np.arange(%d, dtype=np.int64), "image": images}, split_records=100)
        .map(ops.random_flip(mode="horizontal"), ops.color_jitter(brightness=0.5))
        .distribute(sys.argv[1], job_name="train", connect_timeout_s=30)
        .batch(16)
        .with_options(seed=5))
how = sys.argv[3]
it = pipe.iterate(state=open(sys.argv[2], "rb").read()) if how.startswith("resume") else pipe.iterate()
for n, batch in enumerate(it, 1):
    sums = batch["image"].reshape(len(batch["id"]), -1).astype(np.int64).sum(axis=1)
    print(" ".join(f"{i}:{s}" for i, s in zip(batch["id"], sums)), flush=True)
    if how in ("first", "checkpoint") and n == 10:
        with open(sys.argv[2] + ".tmp", "wb") as f:
            f.write(it.state())
            f.flush()
            os.fsync(f.fileno())
        os.replace(sys.argv[2] + ".tmp", sys.argv[2])
        print("saved", flush=True)
        if how == "checkpoint":  # the trainer's job ends with it: the dispatcher's job ends too
            break
    if (how == "first" and n > 10) or how == "resume slowly":
        time.sleep(0.05)
print("end", flush=True)
""" % (ROWS, ROWS)


def _trainer(address, state, how):
    return subprocess.Popen([sys.executable, "-c", _TRAINER, address, str(state), how], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def _samples(lines):
    """{id: image checksum} of the batch lines, and how many of each id."""
    sums, count = {}, {}
    for line in lines:
        for pair in line.split():
            i, s = (int(x) for x in pair.split(":"))
            sums[i] = s
            count[i] = count.get(i, 0) + 1
    return sums, count


@pytest.fixture
def service(tmp_path):
    """A journaling dispatcher and two workers; yields (address, restart)."""
    work = tmp_path / "work"
    # The killed trainer's client outlives the restart (the resumed one
    # takes its place), as when a trainer restarts within seconds.
    flags = ["--host", "127.0.0.1", "--work-dir", str(work), "--client-timeout", "60"]
    processes = {}
    processes["dispatcher"], port = start_server(["dispatcher", "--port", "0", *flags])
    address = f"127.0.0.1:{port}"
    workers = [start_server(["worker", "--dispatcher", address, "--host", "127.0.0.1", "--threads", "1"])[0]
               for _ in range(2)]

    def restart():
        processes["dispatcher"].send_signal(signal.SIGKILL)
        processes["dispatcher"].wait()
        processes["dispatcher"], _ = start_server(["dispatcher", "--port", str(port), *flags])

    yield address, restart
    for process in (*workers, processes["dispatcher"]):
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.parametrize("restart_dispatcher", [False, True])
def test_a_trainer_killed_after_a_checkpoint_resumes_with_exactly_the_samples_it_had_not_seen(
        service, tmp_path, restart_dispatcher):
    address, restart = service
    state = tmp_path / "state"
    first = _trainer(address, state, "first")
    seen = []
    for line in first.stdout:  # the checkpoint, then some batches it will not count
        line = line.strip()
        if line == "saved":
            break
        seen.append(line)
    lost = [first.stdout.readline() for _ in range(5)]
    assert all(":" in line for line in lost), lost
    first.send_signal(signal.SIGKILL)
    first.wait()
    if restart_dispatcher:
        restart()

    second = _trainer(address, state, "resume")
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    rest = out.strip().split("\n")
    assert rest[-1] == "end"
    before, before_count = _samples(seen)
    after, after_count = _samples(rest[:-1])
    assert len(before) == 10 * 16
    assert not set(before) & set(after), "samples delivered before the checkpoint came again"
    assert sorted([*before, *after]) == list(range(ROWS))
    assert all(n == 1 for n in after_count.values()), "a sample came twice after the resume"

    # The same augmentation as an uninterrupted run, which a fresh job gives.
    whole = _trainer(address, tmp_path / "unused", "whole")
    out, err = whole.communicate(timeout=300)
    assert whole.returncode == 0, err
    uninterrupted, _ = _samples(out.strip().split("\n")[:-1])
    assert {**before, **after} == uninterrupted


def test_a_state_resumed_twice_after_its_job_ended_takes_back_what_the_first_resume_did(service, tmp_path):
    # The trainer checkpoints and exits: its job ends with it. Resumed, the
    # state starts a new job; that trainer is killed before it checkpoints
    # again; the state resumed once more must get back every sample the
    # killed one had taken, though they were taken in another job.
    address, _ = service
    state = tmp_path / "state"
    first = _trainer(address, state, "checkpoint")
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    lines = out.strip().split("\n")
    assert lines[-2:] == ["saved", "end"], lines[-3:]
    before, _ = _samples(lines[:-2])
    killed = _trainer(address, state, "resume slowly")
    taken = [killed.stdout.readline() for _ in range(40)]
    assert all(":" in line for line in taken), taken
    time.sleep(2)  # its heartbeats report the splits it finished (a guard, not a timing assertion)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    again = _trainer(address, state, "resume")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    rest = out.strip().split("\n")
    assert rest[-1] == "end"
    after, count = _samples(rest[:-1])
    missing = sorted(set(range(ROWS)) - set(before) - set(after))
    assert not missing, f"{len(missing)} samples never came again: {missing[:10]}..."
    assert not set(before) & set(after) and all(n == 1 for n in count.values())
