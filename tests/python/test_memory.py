"""The memory budget against the process's RSS (docs/memory.md): what the
engine reports holding, the bound it keeps, the error for a budget too
small to run in, and the memory it gives back."""

import gc
import json
import os
import subprocess
import time

import numpy as np
import pytest

import sluice
from held_memory import read_watching, rss_anon, write_one_record_batch
from sluice import ops

MIB = 1 << 20
ROW = MIB // 4  # float32 values: 1 MiB a sample
ROWS = 512
BATCH = 16      # 16 MiB a batch, 512 MiB an epoch


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def one_mib_of(sample):
    return {"x": np.full(ROW, float(sample["i"]), np.float32)}


def big_rows(budget_mib):
    """Tiny rows shuffled, then a python op making 1 MiB of each, batched and
    prefetched far ahead: unbounded, the whole epoch can pile up."""
    return (sluice.arrays({"i": np.arange(ROWS, dtype=np.int64)})
            .shuffle(64)
            .map(ops.python(one_mib_of, outputs={"x": ("float32", [ROW])}, processes=1))
            .batch(BATCH)
            .prefetch(64)
            .with_options(memory_budget_bytes=budget_mib * MIB, seed=3))


def watch(pipe, until, seconds):
    """Takes one batch, then keeps it while the pipeline works ahead: the
    highest RSS over baseline and the engine's bytes in use, sampled until
    `until(in_use)` or `seconds` pass."""
    baseline = rss()
    it = iter(pipe)
    first = next(it)
    assert first["x"].shape == (BATCH, ROW)
    most_rss, most_in_use = 0, 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        most_rss = max(most_rss, rss() - baseline)
        most_in_use = max(most_in_use, pipe.memory()["in_use"])
        if until(most_in_use):
            break
        time.sleep(0.05)
    rest = sum(b["x"].shape[0] for b in it)
    assert rest == ROWS - BATCH  # nothing dropped while held back
    return most_rss, most_in_use


def test_unbounded_the_prefetch_piles_up_the_epoch():
    # The control: the same pipeline with room for it holds far more than
    # the budget of the next test (polled up to a minute on a busy host).
    _, in_use = watch(big_rows(2048), lambda b: b >= 300 * MIB, seconds=60)
    assert in_use >= 300 * MIB


def test_the_budget_bounds_rss_with_a_shuffle_a_python_op_and_prefetch():
    budget = 96
    pipe = big_rows(budget)
    grew, in_use = watch(pipe, lambda b: False, seconds=3)
    # Over the budget by at most one element per stage (a 16 MiB chunk of the
    # map and of the batch node); 100 MiB more for the Python objects of the
    # batches taken and the python op's process.
    assert in_use <= (budget + 2 * 16) * MIB
    assert grew <= (budget + 2 * 16 + 100) * MIB, f"RSS grew {grew / MIB:.0f} MiB"
    m = pipe.memory()
    assert m["peak_in_use"] <= (budget + 2 * 16) * MIB
    # The python op's shared memory carries a chunk of its rows of 1 MiB
    # back (with a header, in a mapping grown by doubling).
    assert MIB < m["python_shared"] <= 64 * MIB
    assert m["in_use"] + m["python_shared"] <= (budget + 2 * 16) * MIB  # counted in the budget
    assert m["held"] == (m["in_use"] + m["cached"] + m["rings"] + m["object_blocks"] + m["python_shared"] + m["staging"]
                         + m["mapped_files"] + m["columnar"] + m["arrays"])
    assert m["peak_held"] >= m["peak_in_use"]


def rss_file():
    """The process's resident pages of mapped files, in bytes."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssFile:"))


def write_idx(path, array):
    """An IDX file (MNIST's format): uint8, its dimensions big-endian."""
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape))
        f.write(array.tobytes())


def test_the_files_a_source_maps_are_reported_while_it_reads_them(tmp_path):
    # 20,000 MNIST-sized images: 15.7 MB mapped, counted in RSS as they are read.
    images = np.random.default_rng(0).integers(0, 256, (20000, 28, 28), dtype=np.uint8)
    write_idx(tmp_path / "images", images)
    write_idx(tmp_path / "labels", np.zeros(20000, np.uint8))
    outside = sluice.arrays({"i": np.arange(4, dtype=np.int64)}).memory()["mapped_files"]
    pipe = sluice.mnist(str(tmp_path / "images"), str(tmp_path / "labels")).batch(1000)
    file_pages = rss_file()
    rows, most_file_rss, mapped = 0, 0, []
    for batch in pipe:
        rows += len(batch["image"])
        most_file_rss = max(most_file_rss, rss_file() - file_pages)
        m = pipe.memory()
        mapped.append(m["mapped_files"] - outside)
        assert m["held"] >= m["mapped_files"]
    assert rows == 20000
    size = os.path.getsize(tmp_path / "images")
    assert min(mapped) == size  # the images' file, the labels are read
    # What RSS counts of them is at most what is reported (1 MiB for the
    # pages of other files the process touched meanwhile).
    assert most_file_rss <= size + MIB
    del pipe, batch
    assert sluice.arrays({"i": np.arange(4, dtype=np.int64)}).memory()["mapped_files"] == outside


def held_arrays():
    """The arrays rows the process holds, less those of the pipeline that asks."""
    return sluice.arrays({"i": np.zeros(1, np.uint8)}).memory()["arrays"] - 2


def test_an_arrays_sources_rows_are_reported_and_given_back():
    # Held twice: the definition the pipeline keeps, and its source's copy;
    # both were in no kind, RSS 30 times what memory() said.
    before = held_arrays()
    rows = np.random.default_rng(0).integers(0, 256, (20000, 1024), dtype=np.uint8)
    pipe = sluice.arrays({"x": rows}).batch(500)
    resident = rss()
    m = pipe.memory()
    assert m["arrays"] - before == 2 * rows.nbytes
    assert m["held"] >= m["arrays"]
    # RSS took them, and what parsing the definition held on the way (the
    # JSON text, its base64 decoded), which the allocator may keep.
    assert rss() - resident >= m["arrays"] - before
    assert sum(len(b["x"]) for b in pipe) == 20000
    del pipe
    gc.collect()
    assert held_arrays() == before


def test_a_budget_too_small_for_one_batch_names_the_minimum_and_the_node():
    with pytest.raises(sluice.InvalidArgumentError, match=r"memory_budget_bytes 8388608 is less than the 1677\d+ "
                                                          r"bytes .* one chunk of 16 rows .*node 'map_2' 1677\d+"):
        big_rows(8).memory()


def test_the_default_budget_is_sized_to_the_machine_and_printed():
    m = sluice.arrays({"i": np.arange(4, dtype=np.int64)}).memory()
    assert 256 * MIB <= m["budget"] <= 2048 * MIB
    assert m["budget_default"].startswith(f"{m['budget'] // MIB} MiB (1/128 of ")


def test_the_pipeline_gives_its_memory_back():
    baseline = rss()
    pipe = big_rows(256)
    for batch in pipe:
        pass
    del batch
    m = pipe.memory()
    assert m["in_use"] == 0
    assert 0 < m["cached"] <= m["peak_in_use"]  # at most its working set, kept for the next epoch
    del pipe
    # The blocks go back with the pipeline (a process-wide cache kept them).
    assert rss() - baseline < 64 * MIB


def test_the_budget_counts_a_local_workers_rings():
    # The python op runs on a local worker, which hands its rows over a
    # shared-memory ring; the ring's bytes count against the budget here.
    budget = 160
    pipe = (sluice.arrays({"i": np.arange(ROWS, dtype=np.int64)})
            .shuffle(64)
            .map(ops.python(one_mib_of, outputs={"x": ("float32", [ROW])}, processes=1))
            .distribute(local_workers=1)
            .batch(BATCH)
            .prefetch(64)
            .with_options(memory_budget_bytes=budget * MIB, seed=3))
    grew, in_use = watch(pipe, lambda b: False, seconds=3)
    m = pipe.memory()
    assert m["rings"] >= 16 * MIB
    assert m["held"] == (m["in_use"] + m["cached"] + m["rings"] + m["object_blocks"] + m["python_shared"] + m["staging"]
                         + m["mapped_files"] + m["columnar"] + m["arrays"])
    # Batches in the pool, beside the ring, within the budget but for the
    # 16 MiB batch each stage may finish (unbounded: the whole 512 MiB epoch).
    assert in_use <= budget * MIB - m["rings"] + 2 * 16 * MIB
    assert grew <= (budget + 2 * 16 + 100) * MIB, f"RSS grew {grew / MIB:.0f} MiB"


def test_a_local_workers_ring_takes_at_most_half_the_budget_and_the_pool_the_rest():
    # A ring sized by three batches would be 64 MiB, twice this budget: it
    # shrinks to half the budget, and the pool caches no more than the rest.
    budget = 32
    pipe = (sluice.arrays({"id": np.arange(8000, dtype=np.int64),
                           "image": np.zeros((8000, 3072), np.uint8)}, split_records=500)
            .distribute(local_workers=1)
            .batch(1000)
            .map(ops.rescale(field="image", scale=1 / 255))
            .with_options(memory_budget_bytes=budget * MIB))
    ids = np.concatenate([b["id"] for b in pipe])
    assert np.array_equal(np.sort(ids), np.arange(8000))
    m = pipe.memory()
    assert 0 < m["rings"] <= budget * MIB // 2
    assert m["held"] - m["arrays"] <= budget * MIB, m  # the source's rows are the user's, not the budget's


def test_a_budget_too_small_for_the_maps_after_a_distribute_node_is_refused():
    # The client runs them on each batch as it arrives: 1000 rows of 3072
    # float32 values need 12 MiB.
    pipe = (sluice.arrays({"image": np.zeros((4000, 3072), np.uint8)})
            .distribute(local_workers=1)
            .batch(1000)
            .map(ops.rescale(field="image", scale=1 / 255))
            .with_options(memory_budget_bytes=MIB))
    with pytest.raises(sluice.InvalidArgumentError, match=r"needs to make progress.*node 'distribute_1' 12582912"):
        pipe.engine


def test_a_local_workers_chunks_of_large_rows_fit_a_budget_that_runs_in_process():
    # Rows of 768 KiB before the distribute node: a worker's part has no
    # batch, and chunks of 128 of them (96 MiB a map) were its minimum.
    def make(local):
        pipe = (sluice.arrays({"id": np.arange(40, dtype=np.int64), "image": np.zeros((40, 8, 8, 3), np.uint8)})
                .map(ops.resize(field="image", size=[512])))
        pipe = pipe.distribute(local_workers=1) if local else pipe
        return pipe.batch(4).with_options(memory_budget_bytes=48 * MIB)
    for local in (False, True):
        pipe = make(local)
        assert sorted(int(i) for b in pipe for i in b["id"]) == list(range(40))
        assert pipe.memory()["peak_in_use"] <= 48 * MIB


def test_sluice_run_reports_the_python_processes_shared_memory(tmp_path):
    import user_code
    rows = np.arange(64 * 4096, dtype=np.uint8).reshape(64, 4096)
    pipe = (sluice.arrays({"image": rows})
            .map(ops.python(user_code.invert, outputs={"image": ("uint8", [4096])}, processes=1))
            .batch(16))
    (tmp_path / "p.json").write_text(pipe.to_json())
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run(["sluice", "run", str(tmp_path / "p.json"), "--json"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.splitlines()[-1])
    assert report["samples"] == 64
    assert report["python_shared_peak_bytes"] >= 4096  # at least a row went through it
    text = subprocess.run(["sluice", "run", str(tmp_path / "p.json")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert "shared with Python processes" in text.stdout


def test_parallel_reads_stay_within_the_budget_from_the_first_split(tmp_path):
    # Eight files of ~3 MiB read 8 at a time under an 8 MiB budget: before
    # a split's size is known, readers after the next split wait for one.
    subprocess.run(["sluice", "make-data", "cifar10", "--out", str(tmp_path), "--count", "8000", "--files", "8"],
                   check=True, capture_output=True)
    split = max(f.stat().st_size for f in tmp_path.glob("*.tfrecord"))
    pipe = (sluice.tfrecord(str(tmp_path / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"},
                            parallel_reads=8)
            .batch(256)
            .with_options(memory_budget_bytes=8 * MIB))
    assert sum(len(b["label"]) for b in pipe) == 8000 // 256 * 256 + 8000 % 256
    # Past the budget at most: the split handed on (its chunks queued for
    # the batch), the next one (read whatever the budget: the pipeline
    # waits for it) and the batch being made. Eight readers at once held
    # eight splits.
    assert pipe.memory()["peak_in_use"] <= 8 * MIB + 2 * split + 256 * 3080, pipe.memory()


class QuarterMibItems:
    """A map-style dataset of 256 KiB items: a split of 64 takes 16 MiB."""

    def __len__(self):
        return 256

    def __getitem__(self, i):
        return {"x": np.full(256 * 1024, i % 251, np.uint8), "i": np.int64(i)}


def test_a_source_reading_whole_splits_counts_its_largest_in_the_minimum():
    # Two processes read splits ahead, each split whole: one of 64 items
    # is 16 MiB, twice an 8 MiB budget, which held 20 MiB unrefused.
    with pytest.raises(sluice.InvalidArgumentError,
                       match=r"less than the 1677\d+ bytes .*node 'source_0' 1677\d+ \(the largest split, read "
                             r"whole: parallel_reads 2; smaller splits take less, split_records\)"):
        sluice.from_dataset(QuarterMibItems(), processes=2).batch(8).with_options(memory_budget_bytes=8 * MIB).memory()
    pipe = (sluice.from_dataset(QuarterMibItems(), processes=2, split_records=8)
            .batch(8).with_options(memory_budget_bytes=8 * MIB))
    assert sorted(np.concatenate([b["i"] for b in pipe]).tolist()) == list(range(256))
    # Past the budget by one split at most: the one the consumer waits for.
    assert pipe.memory()["peak_in_use"] <= 8 * MIB + 2 * MIB, pipe.memory()


def test_chunks_of_large_variable_length_records_stay_within_the_budget(tmp_path):
    # Records of 4 MiB of variable length filled 64 MiB chunks whatever the
    # budget: 88 MiB in use under 16 MiB. A chunk now takes an eighth of
    # the budget, one record at least, as records of a fixed length do.
    import io
    import tarfile
    rng = np.random.default_rng(5)
    blobs = [rng.integers(0, 256, 4 * MIB + i, dtype=np.uint8).tobytes() for i in range(10)]
    with tarfile.open(tmp_path / "shard-0.tar", "w") as tar:
        for i, blob in enumerate(blobs):
            member = tarfile.TarInfo(f"s{i:02d}.bin")
            member.size = len(blob)
            tar.addfile(member, io.BytesIO(blob))
    pipe = (sluice.webdataset(str(tmp_path / "shard-0.tar"), {"blob": "bin"}, shuffle=False)
            .with_options(memory_budget_bytes=16 * MIB))
    assert [bytes(row["blob"]) for row in pipe] == blobs
    assert pipe.memory()["peak_in_use"] <= 16 * MIB + 5 * MIB, pipe.memory()


def test_rss_stays_flat_over_epochs_at_a_tight_budget(tmp_path):
    # Chunks of 128 CIFAR rows (blocks of 512 KiB) came from the heap, and at
    # a budget they were freed and taken again each epoch on other threads:
    # RSS grew 45 MB over 20 epochs, flat at the default budget.
    subprocess.run(["sluice", "make-data", "cifar10", "--out", str(tmp_path), "--count", "20000", "--files", "8"],
                   check=True, capture_output=True)
    pipe = (sluice.tfrecord(str(tmp_path / "*.tfrecord"), {"image": ("bytes", 3072), "label": "int64"})
            .map(ops.reshape(shape=[32, 32, 3])).shuffle(2048).batch(256)
            .map(ops.rescale(scale=1 / 255)).prefetch()
            .with_options(memory_budget_bytes=14 * MIB))
    after = []
    for _ in range(12):
        assert sum(len(b["label"]) for b in pipe) == 20000
        after.append(rss())
    assert max(after[2:]) - after[2] <= 8 * MIB, [round(a / MIB, 1) for a in after]


def test_decoded_row_groups_are_reported_and_rss_holds_no_more(tmp_path):
    # Row groups of 12 MiB of binary values: decoded into buffers grown by
    # doubling, whose freed steps the heap kept (RSS grew 60 MiB beside the
    # 12 MiB decoded, which memory() did not report).
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    rows, size = 16000, 3072
    blob = np.random.default_rng(5).integers(0, 256, rows * size, dtype=np.uint8).tobytes()
    images = pa.array([blob[i * size:(i + 1) * size] for i in range(rows)], pa.binary())
    pq.write_table(pa.table({"image": images, "label": np.arange(rows, dtype=np.int64)}), tmp_path / "t.parquet",
                   row_group_size=4000, compression="none")
    group = 4000 * size
    pipe = (sluice.parquet(str(tmp_path / "t.parquet"), ["image", "label"]).batch(64)
            .with_options(memory_budget_bytes=16 * MIB, threads=1))
    outside = sluice.arrays({"i": np.arange(4, dtype=np.int64)}).memory()["columnar"]  # the process's, before
    base = rss_anon()
    grew = most_decoded = most_held = 0
    for _ in range(3):
        labels = []
        for batch in pipe:
            labels.append(batch["label"])
            first = int(batch["label"][0])
            assert bytes(batch["image"][0]) == blob[first * size:(first + 1) * size]
            m = pipe.memory()
            assert m["held"] >= m["columnar"]
            most_decoded, most_held = max(most_decoded, m["columnar"] - outside), max(most_held, m["held"])
            grew = max(grew, rss_anon() - base)
        assert sorted(np.concatenate(labels).tolist()) == list(range(rows))
    # One row group in use, and the buffers of the one before kept for the next.
    assert group <= most_decoded <= 2 * group + 2 * MIB
    # RSS beyond what memory() held: the batches' Python objects, a few MiB.
    assert grew <= most_held + 12 * MIB, f"RSS grew {grew / MIB:.0f} MiB, held at most {most_held / MIB:.0f} MiB"
    # A peak never falls, though the decoded row groups went back.
    assert pipe.memory()["peak_held"] >= most_held
    del pipe, batch
    assert sluice.arrays({"i": np.arange(4, dtype=np.int64)}).memory()["columnar"] == outside


def test_an_arrow_ipc_files_mapped_record_batch_is_reported_as_the_rss_it_holds(tmp_path):
    # One uncompressed record batch of 47 MiB: its columns are slices of the
    # file's mapping, whose pages RSS counts once read (memory() said 0).
    pytest.importorskip("pyarrow")
    rows, size = 16000, 3072
    blob = write_one_record_batch(tmp_path / "t.arrow", rows, size, seed=6)
    pipe = sluice.arrow_ipc(str(tmp_path / "t.arrow")).batch(64).with_options(memory_budget_bytes=16 * MIB, threads=1)
    outside = sluice.arrays({"i": np.arange(4, dtype=np.int64)}).memory()["mapped_files"]  # the process's, before
    most_mapped, most_held, grew, labels = read_watching(pipe, blob, size, "mapped_files", rss)
    assert sorted(labels) == list(range(rows))
    assert rows * size <= most_mapped <= rows * size + 2 * MIB  # the batch's body, not more
    # RSS beyond what memory() held: the batches' Python objects, a few MiB.
    assert grew <= most_held + 12 * MIB, f"RSS grew {grew / MIB:.0f} MiB, held at most {most_held / MIB:.0f} MiB"
    del pipe
    assert sluice.arrays({"i": np.arange(4, dtype=np.int64)}).memory()["mapped_files"] == outside
