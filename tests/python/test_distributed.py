"""Data-parallel jobs: each rank's share of every epoch, in one process
(simulated ranks) and under real torchrun with the gloo backend; a DDP job
with a rank killed by SIGKILL mid-epoch, restarted from its checkpoint;
the ranks' agreement check; bad shards."""

import collections
import glob
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import sluice
import sluice.torch
import user_code
from conftest import _free_ports

HERE = pathlib.Path(__file__).resolve().parent
JOB = HERE / "ddp_job.py"


def rows(n=103):
    ids = np.arange(n, dtype=np.int64)
    images = (np.arange(n * 4 * 4 * 3) % 251).astype(np.uint8).reshape(n, 4, 4, 3)
    return (sluice.arrays({"id": ids, "image": images}, split_records=10)
            .shuffle(17).map(sluice.ops.random_flip()).with_options(seed=3))


def ids_of(loader):
    return [[int(i) for i in batch["id"]] for batch in loader]


def test_simulated_ranks_share_each_epoch_exactly_once_with_equal_steps(capsys):
    for world in range(1, 9):
        parts = [ids_of(sluice.torch.TorchIterable(rows().batch(3), rank=r, world_size=world, quiet=True))
                 for r in range(world)]
        assert len({len(p) for p in parts}) == 1, f"{world} ranks: unequal steps"
        seen = [i for p in parts for batch in p for i in batch]
        # Less the short last global batch; one rank keeps it (as its batch would).
        assert len(seen) == len(set(seen)) == (103 if world == 1 else 103 // (3 * world) * 3 * world)
    assert capsys.readouterr().err == ""  # quiet


def test_a_loader_of_one_rank_evaluating_alone_sees_every_sample():
    val = sluice.arrays({"id": np.arange(1003, dtype=np.int64)})
    alone = sluice.torch.TorchIterable(val.batch(100), rank=0, world_size=1, quiet=True)
    assert len(alone) == 11 and sorted(i for b in ids_of(alone) for i in b) == list(range(1003))
    dropping = sluice.torch.TorchIterable(val.batch(100, drop_remainder=True), rank=0, world_size=1, quiet=True)
    assert len(dropping) == 10 and len(ids_of(dropping)) == 10


def _logged_ranks(tmp_path, world, n, uneven):
    """Each rank's batches of a sharded from_dataset (its own log of the
    items its processes made), and the logs' index lists."""
    batches, made = [], []
    for r in range(world):
        log = tmp_path / f"rank{r}.log"
        pipe = sluice.from_dataset(user_code.LoggedSquares(n, log), names=("image", "label"), split_records=10)
        log.write_text("")  # from_dataset made dataset[0] to learn the columns
        batches.append(list(pipe.shard(world, r, uneven=uneven).batch(4).with_options(seed=5).iterate()))
        made.append([int(i) for i in log.read_text().split()])
    return batches, made


@pytest.mark.parametrize("uneven", ["drop", "pad"])
def test_a_rank_makes_only_the_items_of_a_python_dataset_it_keeps(tmp_path, uneven):
    # 203 items, global batches of 16: 12 whole ones, then 11 items that
    # "drop" leaves out and "pad" fills from (every rank makes those).
    world, n, tail = 4, 203, 11
    batches, made = _logged_ranks(tmp_path, world, n, uneven)
    kept = []
    for rank_batches, rank_made in zip(batches, made):
        assert len(rank_made) == len(set(rank_made)), "an item made twice"
        rank_kept = set()
        for b in rank_batches:
            assert (b["image"] == (b["label"] % 256)[:, None, None, None].astype(np.uint8)).all()  # not hollow
            padding = b["is_padding"] if uneven == "pad" else np.zeros(len(b["label"]))
            rank_kept |= {int(label) for label, pad in zip(b["label"], padding) if not pad}
        kept.append(rank_kept)
    assert sum(map(len, kept)) == len(set().union(*kept)) == (n - tail if uneven == "drop" else n)
    common = set.intersection(*map(set, made))  # the padded tail, which every rank makes
    assert len(common) == (0 if uneven == "drop" else tail)
    for rank_made, rank_kept in zip(made, kept):
        assert set(rank_made) == rank_kept | common, f"made for nothing: {sorted(set(rank_made) - rank_kept)}"


def test_profiling_a_rank_makes_only_its_items_the_source_alone_too(tmp_path):
    # The profile's run of the source alone keeps the shard after it: its
    # rate counts the rows the rank reads, as the whole pipeline's does.
    # Unshuffled, a rank keeps the same rows every epoch the profile runs.
    log = tmp_path / "made.log"
    pipe = sluice.from_dataset(user_code.LoggedSquares(2000, log, delay=0.002), names=("image", "label"),
                               split_records=10, shuffle=False)
    ranks = pipe.shard(2, 1).batch(4)
    own = {int(i) for b in ranks.iterate() for i in b["label"]}
    assert len(own) == 1000
    log.write_text("")
    result = ranks.profile(seconds=0.3, ablation=False)
    assert result["input_only_samples_per_s"] > 0
    made = {int(i) for i in log.read_text().split()}
    assert made and made <= own, f"made for the other rank: {sorted(made - own)[:10]}"


def test_a_rank_resumed_mid_epoch_makes_the_right_items_of_a_python_dataset(tmp_path):
    log = tmp_path / "made.log"  # one dataset, as a state's fingerprint asks

    def rank1():
        pipe = sluice.from_dataset(user_code.LoggedSquares(203, log), names=("image", "label"), split_records=10)
        return pipe.shard(4, 1, uneven="pad").batch(4).with_options(seed=5)

    whole = [[int(i) for i in b["label"]] for b in rank1().iterate()]
    it = rank1().iterate()
    first = [[int(i) for i in next(it)["label"]] for _ in range(5)]
    state = it.state()
    rest, resumed = [], rank1()
    log.write_text("")
    for b in resumed.iterate(state=state):
        assert (b["image"] == (b["label"] % 256)[:, None, None, None].astype(np.uint8)).all()
        rest.append([int(i) for i in b["label"]])
    assert first + rest == whole
    assert len(log.read_text().split()) < 203 // 2  # its own share, not the epoch


def test_a_rank_reads_only_the_image_files_it_keeps(tmp_path):
    # 24 files, 4 ranks of 2: file 007 is cut short, which only the rank
    # that keeps it reads, and fails on naming it; the others never open it.
    import cv2
    (tmp_path / "c").mkdir()
    files = {}
    for i in range(24):
        image = (np.arange(8 * 8 * 3) * (i + 1) % 251).astype(np.uint8).reshape(8, 8, 3)
        files[i] = cv2.imencode(".jpg", image)[1].tobytes()
        (tmp_path / "c" / f"{i:03d}.jpg").write_bytes(files[i][:-20] if i == 7 else files[i])
    delivered, failed = [], []
    for r in range(4):
        pipe = sluice.image_folder(str(tmp_path)).shard(4, r).batch(2).with_options(seed=1)
        try:
            delivered.append([bytes(image) for b in pipe.iterate(0) for image in b["image"]])
        except sluice.DataLossError as e:
            failed.append((r, str(e)))
    assert len(failed) == 1 and "007.jpg" in failed[0][1], failed
    assert [len(d) for d in delivered] == [6, 6, 6]
    whole = {data for i, data in files.items() if i != 7}
    assert all(image in whole for d in delivered for image in d)  # read, not hollow
    assert len({image for d in delivered for image in d}) == 18


def test_a_rank_resumed_mid_epoch_reads_only_the_image_files_it_keeps(tmp_path):
    # 24 files, 4 ranks of 2, shuffled: rank 1 saves after its first batch.
    # A file rank 0 keeps later in the epoch is then broken (its size kept):
    # the resumed rank 1 never opens it, and yields the rest of its part.
    import cv2
    (tmp_path / "c").mkdir()
    file_of = {}
    for i in range(24):
        image = (np.arange(8 * 8 * 3) * (i + 1) % 251).astype(np.uint8).reshape(8, 8, 3)
        data = cv2.imencode(".jpg", image)[1].tobytes()
        file_of[data] = tmp_path / "c" / f"{i:03d}.jpg"
        file_of[data].write_bytes(data)

    def rank(r):
        return sluice.image_folder(str(tmp_path)).shard(4, r).batch(2).with_options(seed=1)

    def files(batch):
        return [file_of[bytes(image)].name for image in batch["image"]]

    whole = [files(b) for b in rank(1).iterate(0)]
    other = [files(b) for b in rank(0).iterate(0)]
    it = rank(1).iterate(0)
    first = [files(next(it))]
    state = it.state()
    broken = tmp_path / "c" / other[2][0]
    data = broken.read_bytes()
    broken.write_bytes(data[:-2] + b"\0\0")  # no end-of-image marker
    rest = [files(b) for b in rank(1).iterate(state=state)]
    assert first + rest == whole and len(whole) == 3
    with pytest.raises(sluice.DataLossError, match=other[2][0]):
        list(rank(0).iterate(state=state))


def _image_folder_with_one_oversized(root, count=24):
    """`count` 8x8 JPEGs in one class folder; file 005's header claims 32x32."""
    import cv2
    (root / "c").mkdir(parents=True)
    for i in range(count):
        side = 32 if i == 5 else 8
        image = (np.arange(side * side * 3) * (i + 1) % 251).astype(np.uint8).reshape(side, side, 3)
        (root / "c" / f"{i:03d}.jpg").write_bytes(cv2.imencode(".jpg", image)[1].tobytes())


def test_a_row_a_rank_skips_as_corrupt_after_the_shard_shortens_its_batch_not_its_epoch(tmp_path):
    # The decode runs after the shard, so only the rank holding the bad
    # image refuses it; every rank must still yield one batch per global
    # batch, or the others would wait for it in an all-reduce.
    _image_folder_with_one_oversized(tmp_path)
    decode = sluice.ops.decode_resize_center_crop(resize=8, crop=[8], max_pixels=100)

    def rank(index, batch):
        pipe = (sluice.image_folder(str(tmp_path), on_corrupt="skip").shard(2, index).map(decode)
                .batch(batch, drop_remainder=True).with_options(seed=1))
        it = pipe.iterate(0)
        return [len(b["label"]) for b in it], it.skipped

    parts = [rank(r, 4) for r in range(2)]
    assert [len(sizes) for sizes, _ in parts] == [3, 3]
    assert sorted(sum(sizes) for sizes, _ in parts) == [11, 12]
    assert sorted(skipped for _, skipped in parts) == [0, 1]
    assert sorted(s for sizes, _ in parts for s in sizes) == [3] + [4] * 5
    # One shard has no rank to keep in step with: its batches stay whole.
    pipe = (sluice.image_folder(str(tmp_path), on_corrupt="skip").shard(1, 0).map(decode)
            .batch(4, drop_remainder=True).with_options(seed=1))
    assert [len(b["label"]) for b in pipe] == [4] * 5  # 23 rows
    # A rank whose whole part of a global batch was refused cannot keep step.
    with pytest.raises(sluice.DataLossError, match=r"node 'batch_3': every row of this shard's part of its global "
                                                   r"batch \d+ \(this run's\) was skipped as corrupt"):
        for r in range(2):
            rank(r, 1)


def test_a_row_skipped_after_the_shard_keeps_padded_and_resumed_ranks_in_step(tmp_path):
    # 22 images, 2 ranks of batch 4: two whole global batches of 8, and a
    # last one of 6 rows padded to 8. File 005 is refused on its rank.
    _image_folder_with_one_oversized(tmp_path, count=22)
    decode = sluice.ops.decode_resize_center_crop(resize=8, crop=[8], max_pixels=100)

    def pipe(index):
        return (sluice.image_folder(str(tmp_path), on_corrupt="skip").shuffle(22).shard(2, index, uneven="pad")
                .map(decode).batch(4).with_options(seed=1))

    def rows_of(batches):
        return [[(int(label), bytes(image.tobytes())) for label, image in zip(b["label"], b["image"])]
                for b in batches]

    whole = [rows_of(pipe(r).iterate(0)) for r in range(2)]
    assert [len(w) for w in whole] == [3, 3]
    padding = [int(b["is_padding"].sum()) for r in range(2) for b in pipe(r).iterate(0)]
    assert sum(padding) == 2
    sizes = sorted(len(b) for w in whole for b in w)
    assert sizes == [3] + [4] * 5  # the skipped row shortens one batch only
    # Each rank saved after its first batch resumes to the rest of its epoch.
    for r in range(2):
        it = pipe(r).iterate(0)
        first = rows_of([next(it)])
        rest = rows_of(pipe(r).iterate(state=it.state()))
        assert first + rest == whole[r], f"rank {r}"


def test_the_loader_names_the_pipeline_it_runs():
    loader = sluice.torch.TorchIterable(rows(), rank=1, world_size=2, quiet=True)
    shard = [n["shard"] for n in json.loads(loader.pipeline.to_json())["nodes"] if "shard" in n]
    assert shard == [{"num_shards": 2, "index": 1, "uneven": "drop"}]
    list(loader)
    assert loader.pipeline.memory()["peak_in_use"] > 0  # the engine that ran


def test_a_rank_says_in_one_line_what_it_took(capsys):
    loader = sluice.torch.TorchIterable(rows().batch(4), rank=1, world_size=2)
    assert len(loader) == 103 // 8
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ['sluice.torch: rank 1 of 2 (given): shard 1 of 2 after nodes[1] (shuffle) (uneven "drop")']


def test_an_error_names_the_rank_it_failed_on():
    # Launchers other than torchrun prefix no rank to a rank's output.
    failed = {}
    for rank in range(2):
        loader = sluice.torch.TorchIterable(sluice.from_dataset(user_code.Faulty("raise")).batch(4), rank=rank,
                                            world_size=2, quiet=True)
        try:
            list(loader)
        except sluice.SluiceError as e:
            failed[rank] = str(e)
    assert len(failed) == 1, failed  # the rank that keeps dataset[37]
    [(rank, message)] = failed.items()
    assert message.startswith(f"rank {rank} of 2: ") and "dataset[37]" in message, message
    # So do len() and the compiling at the first pass.
    loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(3)}).batch(4), rank=1, world_size=2, quiet=True)
    with pytest.raises(sluice.InvalidArgumentError, match=r"^rank 1 of 2: node 'shard_1': the epoch's 3 rows"):
        len(loader)
    broken = sluice.arrays({"id": np.arange(40)}).map(sluice.ops.python("no_such_module:fn", outputs={"id": None}))
    loader = sluice.torch.TorchIterable(broken.batch(4), rank=1, world_size=2, quiet=True)
    with pytest.raises(sluice.InvalidArgumentError, match=r"^rank 1 of 2: node 'map_2'.*cannot load no_such_module"):
        next(iter(loader))


def test_an_evaluation_loader_of_its_own_says_so(capsys, monkeypatch):
    class Group:  # torch.distributed as a two-rank job's rank 0 sees it
        @staticmethod
        def get_world_size():
            return 2

    monkeypatch.setattr(sluice._distributed, "_dist", lambda: Group)
    sluice.torch.TorchIterable(rows().batch(4), rank=0, world_size=1)
    assert "a loader of this rank's own, in a process group of 2 ranks; the ranks are not checked against each " \
        "other" in capsys.readouterr().err


def test_the_job_comes_from_torchruns_environment(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    loader = sluice.torch.TorchIterable(rows().shard().batch(2), quiet=True)
    assert (loader.rank, loader.world_size) == (1, 3)
    assert len(loader) == 103 // 6


def test_bad_shards_are_named():
    with pytest.raises(ValueError, match=r"index must be in \[0, num_shards\), got index 2 of 2"):
        rows().shard(2, 2)
    with pytest.raises(ValueError, match=r"num_shards must be >= 1 \(0: the job's\), got -1"):
        rows().shard(-1, 0)
    with pytest.raises(ValueError, match='uneven must be "drop" or "pad"'):
        rows().shard(2, 0, uneven="even")
    with pytest.raises(ValueError, match=r"the rank must be in \[0, world_size\)"):
        sluice.torch.TorchIterable(rows(), rank=3, world_size=2)
    with pytest.raises(ValueError, match="says 4 shards but the job has 2 ranks"):
        sluice.torch.TorchIterable(rows().shard(4, 0), rank=0, world_size=2)
    with pytest.raises(sluice.InvalidArgumentError, match="not a filter"):
        rows().shard(2, 0).filter(sluice.ops.keep_if(field="id", cmp="<", value=3)).engine
    too_few = sluice.torch.TorchIterable(rows(3).shard(uneven="pad"), rank=0, world_size=4, quiet=True)
    with pytest.raises(sluice.InvalidArgumentError, match="the epoch has 3 rows for 4 shards"):
        list(too_few)
    with pytest.raises(sluice.InvalidArgumentError, match="the epoch has 3 rows for 4 shards"):
        len(too_few)  # not 0 batches
    with pytest.raises(sluice.InvalidArgumentError, match="make no global batch of 12"):
        len(rows(10).shard(2, 1).batch(6))
    # A filter that keeps no row: every rank would train no step, silently.
    for uneven in ("drop", "pad"):
        nothing = rows().filter(sluice.ops.keep_if(field="id", cmp="<", value=0)).shard(2, 1, uneven=uneven).batch(4)
        with pytest.raises(sluice.InvalidArgumentError, match="the epoch has 0 rows for 2 shards"):
            list(nothing)
    with pytest.raises(ValueError, match=r"shards this pipeline by rank after nodes\[1\] \(shuffle\);.*not a take "
                                         r"\(nodes\[4\]\).*itertools.islice"):
        sluice.torch.TorchIterable(rows().batch(4).take(3), rank=0, world_size=2)
    # It failed at the first pass naming a shard node the user never wrote.
    with pytest.raises(ValueError, match=r"its distribute node \(nodes\[4\]\) hands splits to whichever rank asks.*"
                                         r"mode=\"parallel_epochs\" with the batch before it, or use .*node_pool=True"):
        sluice.torch.TorchIterable(rows().batch(4).distribute("127.0.0.1:1"), rank=0, world_size=2)
    sluice.torch.TorchIterable(rows().batch(4).distribute("127.0.0.1:1", mode="parallel_epochs"), rank=0, world_size=2)


def test_a_function_after_a_padding_shard_that_drops_its_column_is_told_where_it_came_from():
    pipe = (sluice.arrays({"id": np.arange(11, dtype=np.int64)}).shard(2, 0, uneven="pad")
            .map(lambda s: {"id": s["id"] * 1}).batch(3))
    with pytest.raises(sluice.SluiceError, match=r"is_padding.*shard\(uneven=\"pad\"\) added it \(1 marks a repeated"):
        list(pipe)


def test_arguments_of_another_kind_are_named():
    with pytest.raises(TypeError, match="num_shards must be a whole number, got '2' \\(str\\)"):
        rows().shard("2", "1")
    with pytest.raises(ValueError, match="index 5 with num_shards 0"):
        rows().shard(0, 5)
    with pytest.raises(TypeError, match="rank must be a whole number, got 1.0"):
        sluice.torch.TorchIterable(rows(), rank=1.0, world_size=2)
    with pytest.raises(TypeError, match="TorchIterable takes a sluice.Pipeline, got list"):
        sluice.torch.TorchIterable([1, 2])
    loader = sluice.torch.TorchIterable(rows().batch(4), rank=np.int64(1), world_size=np.int64(2), quiet=True)
    assert (loader.rank, loader.world_size) == (1, 2)
    with pytest.raises(ValueError, match="epoch must be >= 0, got -1"):
        loader.set_epoch(-1)
    with pytest.raises(TypeError, match="a dict with 'position' and 'next_epoch', got NoneType"):
        loader.load_state_dict(None)


def test_a_process_of_its_own_reads_the_shard_its_pipeline_names():
    # Not under torch's launcher: its shard node's count is its own.
    everyone = ids_of(rows().batch(2))
    loader = sluice.torch.TorchIterable(rows().shard(2, 1).batch(2))
    # The global batches of 4 whole, shard 1 the second half of each.
    assert ids_of(loader) == [ids for step, ids in enumerate(everyone[:103 // 4 * 2]) if step % 2 == 1]


def test_the_job_of_the_environment_without_its_rank_is_refused_by_the_shard_node(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(sluice.InvalidArgumentError, match=r"\$WORLD_SIZE is 2 but \$RANK is not set"):
        rows().shard().batch(2).engine
    monkeypatch.setenv("RANK", "-1")
    with pytest.raises(sluice.InvalidArgumentError, match=r"got -1 \(from \$RANK\)"):
        rows().shard().batch(2).engine


LOADER_BEFORE_THE_GROUP = """
import sys, torch.distributed as dist, numpy as np, sluice, sluice.torch
rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(103)}).shuffle(16).batch(4))
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
steps = len(loader)
ids = [int(i) for batch in loader for i in batch["id"]]
open(f"{out}/rank{rank}.txt", "w").write(f"{steps} " + " ".join(map(str, ids)))
dist.destroy_process_group()
"""


def test_a_loader_made_before_the_process_group_takes_the_groups_ranks(tmp_path):
    # As scripts started by mp.spawn (no RANK or WORLD_SIZE) often do.
    script = tmp_path / "job.py"
    script.write_text(LOADER_BEFORE_THE_GROUP)
    port = _free_ports(1)[0]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(key, None)
    ranks = [subprocess.Popen([sys.executable, str(script), str(r), str(port), str(tmp_path)], env=env,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    errors = [rank.communicate(timeout=240)[1] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], errors
    assert "rank 1 of 2 (torch.distributed, initialized after this loader was made): shard 1 of 2" in errors[1]
    steps, ids = zip(*((int(words[0]), words[1:]) for words in
                       ((tmp_path / f"rank{r}.txt").read_text().split() for r in range(2))))
    assert steps == (103 // 8, 103 // 8)
    assert [len(i) for i in ids] == [103 // 8 * 4] * 2
    assert not set(ids[0]) & set(ids[1])


def torchrun(out, ranks, *args, **popen):
    """Starts ddp_job.py under torchrun with `ranks` processes."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
                             "--standalone", "--max_restarts=0", str(JOB), str(out), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def torchrun_script(out, text):
    """Runs the script `text` under torchrun with 2 processes, to its end."""
    script = out / "job.py"
    script.write_text(text)
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                           "--max_restarts=0", str(script)], env=dict(os.environ, OMP_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=240)


def read_logs(out):
    """{(epoch, step): {rank: ids}}."""
    steps = collections.defaultdict(dict)
    for log in out.glob("rank*.log"):
        rank = int(log.stem[4:])
        for line in log.read_text().splitlines():
            epoch, step, *ids = map(int, line.split())
            steps[(epoch, step)][rank] = ids
    return steps


def test_torchrun_ranks_get_disjoint_equal_shares_of_each_epoch(tmp_path):
    job = torchrun(tmp_path, 2, "--epochs", "2")
    stdout, stderr = job.communicate(timeout=240)
    assert job.returncode == 0, stderr[-3000:]
    assert "sluice.torch: rank 0 of 2 (torch.distributed): shard 0 of 2 after nodes[1] (shuffle)" in stderr
    steps = read_logs(tmp_path)
    for epoch in (0, 1):
        trained = [i for (e, _), by_rank in steps.items() if e == epoch for ids in by_rank.values() for i in ids]
        assert len(trained) == len(set(trained)) == 300 // 24 * 24
    assert all(len(by_rank) == 2 for by_rank in steps.values())  # both ranks took every step
    # The global batches are the same samples as one rank's batches of 24.
    one = tmp_path / "one"
    one.mkdir()
    single = torchrun(one, 1, "--epochs", "1")
    single.communicate(timeout=240)
    alone = read_logs(one)
    for (epoch, step), by_rank in steps.items():
        if epoch == 0:
            assert by_rank[0] + by_rank[1] == alone[(0, step)][0], f"step {step}"


@pytest.mark.parametrize("kill", [[], ["--kill-pool-worker", "5"]], ids=["", "its_worker_killed"])
def test_the_node_pool_gives_each_rank_the_batches_it_makes_in_process(tmp_path, kill):
    rings_before = set(glob.glob("/dev/shm/sluice-ring-*"))
    # The loaders kept alive in a global: exit_rank releases them all the same.
    pooled = torchrun(tmp_path, 2, "--epochs", "2", "--node-pool", "--keep-loader", *kill)
    _, stderr = pooled.communicate(timeout=240)
    assert pooled.returncode == 0, stderr[-3000:]
    assert set(glob.glob("/dev/shm/sluice-ring-*")) <= rings_before, "a rank's ring was left behind"
    assert "shutting down" not in stderr and "CANCELLED" not in stderr, stderr[-3000:]
    assert "through the node's pool (dispatcher 127.0.0.1:" in stderr
    # The pool's routine events stay out of the trainer's log (--quiet).
    assert "joined" not in stderr and "listening on" not in stderr, stderr[-3000:]
    if kill:  # another worker took over, the ranks' streams going on
        assert "sluice.torch node_pool: the node's worker (pid" in stderr and "in its place" in stderr
    local = tmp_path / "local"
    local.mkdir()
    in_process = torchrun(local, 2, "--epochs", "2")
    in_process.communicate(timeout=240)
    assert read_logs(tmp_path) == read_logs(local)
    assert len(read_logs(tmp_path)) == 2 * (300 // 24)
    # len(loader) through the pool is the in-process pipeline's.
    assert [(tmp_path / f"len{r}.txt").read_text() for r in (0, 1)] == [str(300 // 24)] * 2


@pytest.mark.parametrize("pool", [[], ["--node-pool"]], ids=["in_process", "node_pool"])
def test_a_rank_killed_mid_epoch_restarts_from_the_checkpoint_and_trains_each_sample_once(tmp_path, pool):
    job = torchrun(tmp_path, 2, "--epochs", "2", "--slow-after", "14", *pool)
    deadline = time.time() + 240
    while time.time() < deadline and max((s for (e, s) in read_logs(tmp_path)), default=0) < 17:
        time.sleep(0.2)
    victim = [p for p in subprocess.run(["pgrep", "-f", f"ddp_job.py {tmp_path}"], capture_output=True,
                                        text=True).stdout.split() if int(p) != job.pid]
    assert victim, "no rank process to kill"
    os.kill(int(victim[-1]), signal.SIGKILL)
    _, killed_stderr = job.communicate(timeout=120)
    assert job.returncode != 0, f"the job ended before the kill:\n{killed_stderr[-3000:]}"
    import torch
    checkpointed = torch.load(tmp_path / "ckpt.pt", weights_only=False)["step"]
    before = {k: v for k, v in read_logs(tmp_path).items() if k[1] <= checkpointed}
    for log in tmp_path.glob("rank*.log"):
        log.rename(log.with_suffix(".before"))
    restarted = torchrun(tmp_path, 2, "--epochs", "2", "--resume", *pool)
    _, stderr = restarted.communicate(timeout=240)
    # The whole of it: a rank that aborts prints its threads' stacks
    # (faulthandler, in ddp_job.py) before torchrun's summary.
    assert restarted.returncode == 0, stderr[-12000:]
    after = read_logs(tmp_path)
    context = f"checkpoint at step {checkpointed}, killed pid {victim[-1]} of {victim}; restarted:\n{stderr[-2000:]}"
    assert min(s for (_, s) in after) == checkpointed + 1, context
    killed_epoch = max(e for (e, _) in before)
    trained = [i for steps in (before, after) for (e, _), by_rank in steps.items() if e == killed_epoch
               for ids in by_rank.values() for i in ids]
    twice = sorted({i for i in trained if trained.count(i) > 1})
    assert len(trained) == len(set(trained)) == 300 // 24 * 24, f"{len(trained)} trained, twice: {twice}; {context}"


# Each job fails on every rank, naming what is wrong. A sharded pipeline's
# fingerprint leaves the batch size out: with --batch-skew the ranks would
# take 12 and 13 rows a step and end their epochs apart.
@pytest.mark.parametrize("args, said", [
    (["--epochs", "1", "--seed-per-rank"], ["the ranks disagree on the seed: ranks [0]: 5; ranks [1]: 6"]),
    (["--epochs", "1", "--batch-skew"], ["the ranks disagree on the batch size: ranks [0]: 12; ranks [1]: 13"]),
    (["--epochs", "1", "--same-shard"], ["the ranks read the same shard: ranks [0, 1] read shard 0"]),
    (["--epochs", "2", "--epoch-per-rank"], ["the ranks disagree on the epoch: ranks [0]: 0; ranks [1]: 1"]),
    # A state loaded on rank 0 only: the state differs, not the epoch it holds.
    (["--epochs", "1", "--resume", "--resume-rank0-only"], ["the ranks disagree on the resumed state: ranks [0]: ",
                                                             "ranks [1]: none (no state loaded)"]),
    (["--epochs", "1", "--scale-per-rank"], ["the ranks disagree on the pipeline: ranks [0]: ",
                                             "an attribute set per rank, such as the rank or a path of its own"]),
    (["--alone-unmarked"], ["rank 0 has waited 2 s for ranks [1] to start this loader's first pass",
                            "takes rank=0, world_size=1"]),
])
def test_ranks_that_would_train_wrongly_fail_naming_why(tmp_path, args, said):
    if "--resume" in args:  # a checkpoint first
        saving = torchrun(tmp_path, 2, "--epochs", "1")
        _, err = saving.communicate(timeout=240)
        assert saving.returncode == 0, err[-3000:]
    job = torchrun(tmp_path, 2, *args)
    _, stderr = job.communicate(timeout=240)
    assert job.returncode != 0
    for words in said:
        assert words in stderr, stderr[-3000:]


def test_ranks_whose_pattern_matches_other_files_fail_naming_them(tmp_path, cifar_dir):
    import shutil
    files = sorted(cifar_dir.glob("*.tfrecord"))
    for rank, count in ((0, 2), (1, 3)):  # a node-local copy missing a file
        (tmp_path / "files" / str(rank)).mkdir(parents=True)
        for f in files[:count]:
            shutil.copy(f, tmp_path / "files" / str(rank))
    job = torchrun(tmp_path, 2, "--files-in", str(tmp_path / "files"))
    _, stderr = job.communicate(timeout=240)
    assert job.returncode != 0
    assert "the ranks disagree on the files: ranks [0]: 2 files, 2 splits" in stderr, stderr[-3000:]
    assert "ranks [1]: 3 files, 3 splits" in stderr


def test_a_loader_of_rank_zero_alone_checks_nothing_with_the_other_ranks(tmp_path):
    # The evaluation on rank 0 while the others wait at a barrier: a
    # collective check there would hang both.
    job = torchrun(tmp_path, 2, "--epochs", "1", "--eval-on-rank0")
    _, stderr = job.communicate(timeout=240)
    assert job.returncode == 0, stderr[-3000:]
    assert (tmp_path / "eval.txt").read_text() == "300"


def test_a_dataloader_worker_iterating_the_loader_is_refused():
    import torch.utils.data
    loader = torch.utils.data.DataLoader(sluice.torch.TorchIterable(rows(), quiet=True), batch_size=None,
                                         num_workers=1)
    with pytest.raises(RuntimeError, match="num_workers=0"):
        list(loader)


# Two ranks started as a launcher of one's own does (srun, a scheduler's
# script): rank 0 keeps the process group's store and dies once rank 1's
# loader is made, before anyone's first pass.
_STORE_KEEPER_DIES = """
import os, signal
import numpy as np
import torch.distributed as dist
import sluice
import sluice.torch
dist.init_process_group("gloo")
store = dist.distributed_c10d._get_default_store()
if dist.get_rank() == 0:
    store.wait(["loader made"])
    os.kill(os.getpid(), signal.SIGKILL)
loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(64, dtype=np.int64)}).batch(4), quiet=True)
store.set("loader made", b"")
list(loader)
"""


def test_a_store_whose_keeper_died_is_named_not_taken_for_a_rank_that_never_started(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(_STORE_KEEPER_DIES)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_ports(1)[0]), WORLD_SIZE="2",
               OMP_NUM_THREADS="1")
    ranks = [subprocess.Popen([sys.executable, str(script)], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    _, stderr = ranks[1].communicate(timeout=240)
    ranks[0].wait(timeout=60)
    assert ranks[0].returncode == -signal.SIGKILL
    assert ranks[1].returncode != 0
    assert "rank 1: the process group's store stopped answering" in stderr, stderr[-3000:]
    assert "never started" not in stderr and "has waited" not in stderr, stderr[-3000:]

_RANK_ZERO_ENDS_FIRST = """
import time
import numpy as np
import torch.distributed as dist
import sluice
import sluice.torch
dist.init_process_group("gloo")
rank = dist.get_rank()
loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(800, dtype=np.int64)}).batch(16), node_pool=True)
for epoch in range(2):
    ids = []
    for b in loader:
        ids += b["id"].tolist()
        if rank != 0:
            time.sleep(0.02)  # rank 0 ends first: no collective after the last step
    print(f"rank {rank} epoch {epoch} {len(ids)} {len(set(ids))}", flush=True)
sluice.torch.exit_rank()
"""


def test_the_node_pool_outlasts_local_rank_0_until_the_other_ranks_are_done(tmp_path):
    job = torchrun_script(tmp_path, _RANK_ZERO_ENDS_FIRST)
    assert job.returncode == 0, job.stderr[-3000:]
    for rank in (0, 1):
        for epoch in (0, 1):
            assert f"rank {rank} epoch {epoch} 400 400" in job.stdout, job.stdout + job.stderr[-3000:]
    assert "local rank 0 is done; its pool stops once the node's other ranks are" in job.stderr


_EXIT_RANK_IN_THE_LOOP = """
import numpy as np
import torch
import torch.distributed as dist
import sluice
import sluice.torch
dist.init_process_group("gloo")
rank = dist.get_rank()
loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(800, dtype=np.int64)}).batch(16), node_pool=True)
for step, b in enumerate(loader):
    dist.all_reduce(torch.zeros(1))
    if step == 10:  # preempted: the state saved, the job ends from inside its loop
        state = loader.state_dict()
        dist.barrier()
        print(f"rank {rank} leaves at {step}", flush=True)
        sluice.torch.exit_rank()
"""


def test_exit_rank_inside_the_loop_ends_a_node_pool_job_at_once(tmp_path):
    # The pass's generator held local rank 0's own client: its pool waited
    # for "clients still reading" (itself) for 10 minutes.
    job = torchrun_script(tmp_path, _EXIT_RANK_IN_THE_LOOP)  # a hang guard of 240 s
    assert job.returncode == 0, job.stderr[-3000:]
    assert "rank 0 leaves at 10" in job.stdout and "rank 1 leaves at 10" in job.stdout, job.stdout


_POOL_WORKER_KILLED_AT_EACH_START = """
import os, signal, sys, threading, time
import numpy as np
import torch.distributed as dist
import sluice
import sluice.torch
dist.init_process_group("gloo")
rank = dist.get_rank()
pipe = sluice.arrays({"id": np.arange(100000, dtype=np.int64)}, split_records=100).batch(16)
loader = sluice.torch.TorchIterable(pipe, node_pool=True)
if rank == 0:  # each of the pool's workers killed as it starts, as if for memory
    from sluice import _node_pool
    def kill_each():
        while True:
            worker = _node_pool._pool[1][0]
            if worker.poll() is None:
                os.kill(worker.pid, signal.SIGKILL)
            time.sleep(0.05)
    threading.Thread(target=kill_each, daemon=True).start()
try:
    for b in loader:
        time.sleep(0.01)
    said = f"rank {rank}: the epoch ended"
except Exception as e:
    said = f"rank {rank}: {type(e).__name__}: {e}"
os.write(1, (said + "\\n").encode())  # one write: the ranks share the stream (print's two interleaved)
os._exit(0)
"""


def test_a_node_pool_whose_worker_dies_at_each_start_fails_the_ranks_not_hangs(tmp_path):
    job = torchrun_script(tmp_path, _POOL_WORKER_KILLED_AT_EACH_START)
    assert "exited 5 times within 10 s of its start" in job.stderr, job.stderr[-3000:]
    assert "not replacing it again" in job.stderr
    for rank in (0, 1):
        line = next(iter(re.findall(rf"rank {rank}: [^\n]*", job.stdout)), "")
        assert "UnavailableError" in line and "dispatcher" in line, job.stdout + job.stderr[-3000:]


_DATASET_CRASHING_AT_ONE_INDEX = """
import os, signal
import numpy as np
import torch.distributed as dist
import sluice
import sluice.torch
dist.init_process_group("gloo")
class Crashing:  # a C extension segfaulting on one corrupt file
    def __len__(self):
        return 60
    def __getitem__(self, i):
        if i == 37:
            os.kill(os.getpid(), signal.SIGSEGV)
        return {"id": np.int64(i)}
loader = sluice.torch.TorchIterable(sluice.from_dataset(Crashing(), processes=1, shuffle=False).batch(3),
                                    node_pool=True)
try:
    said = f"rank {dist.get_rank()}: {sum(len(b['id']) for b in loader)} rows"
except Exception as e:
    said = f"rank {dist.get_rank()}: {type(e).__name__}: {e}"
os.write(1, (said + "\\n").encode())
sluice.torch.exit_rank()
"""


def test_a_python_process_crashing_on_one_sample_in_the_node_pool_fails_its_rank_not_retries_forever(tmp_path):
    # Each stream from the pool's worker started a fresh process that died
    # on the same sample: the rank retried once a second without end.
    job = torchrun_script(tmp_path, _DATASET_CRASHING_AT_ONE_INDEX)
    line = next(iter(re.findall(r"rank 0: [^\n]*", job.stdout)), "")
    assert "killed by signal 11 (Segmentation fault) making dataset[37]" in line, job.stdout + job.stderr[-3000:]
    assert "3 times in a row" in line
    assert "rank 1: 30 rows" in job.stdout


_LOCAL_RANK_0_FAILS = """
import numpy as np
import torch.distributed as dist
import sluice
import sluice.torch
dist.init_process_group("gloo")
loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(800, dtype=np.int64)}).batch(16), node_pool=True)
for step, b in enumerate(loader):
    if dist.get_rank() == 0 and step == 5:
        raise RuntimeError("the trainer failed")
    dist.barrier()
"""


def test_a_failing_local_rank_0_stops_its_pool_at_once_and_the_job_ends(tmp_path):
    # It waited (up to 10 minutes) for the node's other ranks to let go of
    # its pool, while they waited for it in the collective: the job hung.
    job = torchrun_script(tmp_path, _LOCAL_RANK_0_FAILS)
    assert job.returncode != 0
    assert "the trainer failed" in job.stderr
    assert "local rank 0 failed (above); its pool stops now" in job.stderr
    assert "its pool stops once the node's other ranks are" not in job.stderr


def test_a_node_pool_without_local_rank_says_what_to_set(monkeypatch):
    from sluice import _node_pool
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(RuntimeError, match="LOCAL_RANK is not set, so this rank cannot tell whether it starts its "
                                           "node's pool; run under torchrun"):
        _node_pool.address(None)


_STATE_LOADED_BEFORE_THE_GROUP = """
import numpy as np
import torch.distributed as dist
import sluice
import sluice.torch
loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(800, dtype=np.int64)}).batch(16))
loader.load_state_dict({"position": None, "next_epoch": 0, "samples": 100, "world_size": 1})  # mp.spawn's order
dist.init_process_group("gloo")
rows = sum(len(b["id"]) for b in loader)
print(f"rank {dist.get_rank()} read {rows} samples {loader.samples}", flush=True)
sluice.torch.exit_rank()
"""


def test_a_state_loaded_before_the_process_group_counts_its_samples_among_the_groups_ranks(tmp_path):
    job = torchrun_script(tmp_path, _STATE_LOADED_BEFORE_THE_GROUP)
    assert job.returncode == 0, job.stderr[-3000:]
    for rank in (0, 1):  # the saving job's 100 split between two ranks, then each rank's 400
        assert f"rank {rank} read 400 samples 450" in job.stdout, job.stdout + job.stderr[-3000:]
