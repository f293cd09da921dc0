"""Parquet and Arrow IPC files written by pyarrow, and Arrow data in memory
(from_arrow), read through sluice's C++ sources: every Arrow type sluice
maps, against pyarrow's own reading of the same data; row groups and
record batches as splits (every row once per shuffled epoch); in-memory
data viewed in place; bad files, columns and nulls named."""

import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import sluice
from sluice import ops

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
ipc = pytest.importorskip("pyarrow.ipc")
feather = pytest.importorskip("pyarrow.feather")



def _build_reads_parquet():
    with tempfile.TemporaryDirectory() as d:
        pq.write_table(pa.table({"x": [1]}), f"{d}/probe.parquet")
        try:
            sluice.parquet(f"{d}/probe.parquet").schema
        except sluice.SluiceError as e:
            if "reads no Parquet" in str(e):
                return False
            raise
    return True


if not _build_reads_parquet():
    pytest.skip("this build has no Arrow libraries (pyarrow was missing when it was configured)",
                allow_module_level=True)

ROWS = 50


def table(start=0, rows=ROWS):
    ids = np.arange(start, start + rows)
    rng = np.random.default_rng(start)
    emb = rng.standard_normal((rows, 3)).astype(np.float32)
    grid = rng.integers(0, 256, (rows, 2, 4)).astype(np.uint8)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "blob": pa.array([bytes([int(i) % 256]) * (int(i) % 7 + 1) for i in ids], pa.binary()),
        "caption": pa.array([f"row {i}" for i in ids], pa.string()),
        "small": pa.array((ids % 100) - 50, pa.int16()),
        "u32": pa.array(ids * 3, pa.uint32()),
        "score": pa.array(ids / 7.0, pa.float64()),
        "flag": pa.array(ids % 3 == 0, pa.bool_()),
        "key": pa.array([int(i).to_bytes(4, "little") for i in ids], pa.binary(4)),
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(emb.ravel()), 3),
        "grid": pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(pa.array(grid.ravel()), 4), 2),
    })


def write_parquet(tmp_path, files=2, row_group_size=7):
    for f in range(files):
        pq.write_table(table(f * ROWS), tmp_path / f"part-{f}.parquet", row_group_size=row_group_size)
    return str(tmp_path / "part-*.parquet")


def write_ipc(path, t, batch_rows):
    with ipc.new_file(path, t.schema) as w:
        for b in t.to_batches(max_chunksize=batch_rows):
            w.write_batch(b)


def check_rows(got, want):
    """sluice's columns against pyarrow's values for the same rows."""
    assert got["id"].dtype == np.int64 and got["id"].tolist() == want["id"].to_pylist()
    assert [bytes(b) for b in got["blob"]] == want["blob"].to_pylist()
    assert [bytes(b).decode() for b in got["caption"]] == want["caption"].to_pylist()
    assert got["small"].dtype == np.int32 and got["small"].tolist() == want["small"].to_pylist()
    assert got["u32"].dtype == np.int64 and got["u32"].tolist() == want["u32"].to_pylist()
    assert got["score"].dtype == np.float32
    np.testing.assert_array_equal(got["score"], np.asarray(want["score"].to_pylist(), np.float32))
    assert got["flag"].dtype == np.uint8 and got["flag"].tolist() == [int(v) for v in want["flag"].to_pylist()]
    assert got["key"].shape[1:] == (4,)
    assert [bytes(k) for k in got["key"]] == want["key"].to_pylist()
    assert got["emb"].dtype == np.float32 and got["emb"].shape[1:] == (3,)
    np.testing.assert_array_equal(got["emb"], np.asarray(want["emb"].to_pylist(), np.float32))
    assert got["grid"].dtype == np.uint8 and got["grid"].shape[1:] == (2, 4)
    np.testing.assert_array_equal(got["grid"], np.asarray(want["grid"].to_pylist(), np.uint8))


def rows_of(pipe):
    """Every row of one epoch, unbatched: byte columns as a list of each
    row's bytes, the others stacked."""
    out = {}
    for row in pipe:
        for k, v in row.items():
            out.setdefault(k, []).append(v)
    return {k: v if k in ("blob", "caption") else np.stack(v) for k, v in out.items()}


def test_parquet_columns_equal_pyarrows_reading(tmp_path):
    pattern = write_parquet(tmp_path)
    got = rows_of(sluice.parquet(pattern, shuffle=False))
    want = pa.concat_tables([pq.read_table(tmp_path / f"part-{f}.parquet") for f in range(2)])
    check_rows(got, want)


def test_files_of_many_row_groups_equal_pyarrows_reading_every_epoch(tmp_path):
    # Each file's footer is parsed once and kept: later row groups, and
    # later epochs, read through the kept one.
    pattern = write_parquet(tmp_path, row_group_size=1)
    pipe = sluice.parquet(pattern, shuffle=False)
    want = pa.concat_tables([pq.read_table(tmp_path / f"part-{f}.parquet") for f in range(2)])
    for _ in range(2):
        check_rows(rows_of(pipe), want)


def test_arrow_ipc_columns_equal_pyarrows_reading(tmp_path):
    t = table()
    write_ipc(tmp_path / "t.arrow", t, batch_rows=9)
    check_rows(rows_of(sluice.arrow_ipc(str(tmp_path / "t.arrow"), shuffle=False)), t)


def test_row_groups_are_splits_every_row_once_per_shuffled_epoch(tmp_path):
    pattern = write_parquet(tmp_path, files=3, row_group_size=8)
    pipe = sluice.parquet(pattern, ["id", "emb"], shuffle=True).batch(16)
    orders = []
    for _ in range(2):
        seen = [i for b in pipe for i in b["id"].tolist()]
        assert sorted(seen) == list(range(3 * ROWS))
        orders.append(seen)
    assert orders[0] != orders[1]
    # Row groups (8 rows, the last of a file 2) come whole, their rows
    # shuffled within: a sorted file's groups mix (each came in order).
    for seen in orders:
        groups = [(i // ROWS, i % ROWS // 8) for i in seen]
        assert sum(a != b for a, b in zip(groups, groups[1:])) == len(set(groups)) - 1
        runs = [seen[g:g + 8] for g in range(len(seen)) if g == 0 or groups[g] != groups[g - 1]]
        assert sum(r == sorted(r) for r in runs if len(r) == 8) <= 1


@pytest.mark.parametrize("kind", ["parquet", "arrow_ipc"])
def test_a_shuffled_epoch_resumed_at_any_batch_yields_exactly_the_rest(tmp_path, kind):
    # Saved where a row group ended, the resume dropped the rows of every
    # later group of the file below that row, those shuffled after it too:
    # up to 81% of the epoch lost, silently.
    table = pa.table({"id": np.arange(200, dtype=np.int64)})
    path = str(tmp_path / f"t.{kind}")
    if kind == "parquet":
        pq.write_table(table, path, row_group_size=5)
    else:
        with ipc.new_file(path, table.schema) as writer:
            writer.write_table(table, max_chunksize=5)
    pipe = getattr(sluice, kind)(path, shuffle=True).batch(10)
    whole = [i for b in pipe.iterate(0) for i in b["id"].tolist()]
    assert whole != sorted(whole)
    for k in range(1, 20):
        it = pipe.iterate(0)
        seen = [i for _, b in zip(range(k), it) for i in b["id"].tolist()]
        rest = [i for b in pipe.iterate(state=it.state()) for i in b["id"].tolist()]
        assert seen + rest == whole, f"resumed after {k} batches"


def test_an_empty_row_group_or_record_batch_hides_none_after_it(tmp_path):
    schema = pa.schema([("x", pa.int64())])
    parts = [[], [1, 2], [], [], [3, 4, 5], [6]]
    with pq.ParquetWriter(tmp_path / "gaps.parquet", schema) as w:
        for part in parts:
            w.write_table(pa.table({"x": pa.array(part, pa.int64())}, schema=schema))
    batches = [pa.record_batch({"x": pa.array(part, pa.int64())}, schema=schema) for part in parts]
    with pa.ipc.new_file(str(tmp_path / "gaps.arrow"), schema) as w:
        for b in batches:
            w.write_batch(b)
    assert pq.ParquetFile(tmp_path / "gaps.parquet").metadata.num_row_groups == len(parts)
    for pipe in (sluice.parquet(str(tmp_path / "gaps.parquet"), shuffle=True),
                 sluice.arrow_ipc(str(tmp_path / "gaps.arrow"), shuffle=True),
                 sluice.from_arrow(pa.Table.from_batches(batches), shuffle=True)):
        assert len(pipe) == 6
        assert sorted(int(r["x"]) for r in pipe) == [1, 2, 3, 4, 5, 6]


def test_columns_pick_and_order_and_feed_ops(tmp_path):
    pattern = write_parquet(tmp_path, files=1)
    pipe = (sluice.parquet(pattern, ["grid", "id"], shuffle=False)
            .map(ops.cast(field="grid", dtype="float32"))
            .batch(ROWS))
    b = next(iter(pipe))
    assert list(b) == ["grid", "id"]
    want = pq.read_table(tmp_path / "part-0.parquet")
    np.testing.assert_array_equal(b["grid"], np.asarray(want["grid"].to_pylist(), np.float32))


def test_bad_columns_and_files_are_named(tmp_path):
    pattern = write_parquet(tmp_path, files=1)
    with pytest.raises(sluice.InvalidArgumentError, match=r"part-0\.parquet has no column 'label' \(columns: id, blob"):
        sluice.parquet(pattern, ["id", "label"]).schema
    pq.write_table(pa.table({"tags": pa.array([[1, 2], [3]], pa.list_(pa.int32()))}), tmp_path / "lists.parquet")
    with pytest.raises(sluice.InvalidArgumentError, match=r"column 'tags' of .*lists\.parquet is list<"):
        sluice.parquet(str(tmp_path / "lists.parquet")).schema
    pq.write_table(table().cast(table().schema.set(0, pa.field("id", pa.float32()))), tmp_path / "other.parquet")
    with pytest.raises(sluice.InvalidArgumentError, match=r"column 'id' is int64.*part-0.*float32.*other\.parquet"):
        sluice.parquet([str(tmp_path / "part-0.parquet"), str(tmp_path / "other.parquet")]).schema
    twice = pa.Table.from_arrays([pa.array([1, 2]), pa.array([3, 4])], names=["a", "a"])
    pq.write_table(twice, tmp_path / "twice.parquet")
    with pytest.raises(sluice.InvalidArgumentError, match=r"twice\.parquet has two columns named 'a'"):
        sluice.parquet(str(tmp_path / "twice.parquet")).schema
    (tmp_path / "junk.parquet").write_bytes(b"not a parquet file at all")
    with pytest.raises(sluice.InvalidArgumentError, match=r"junk\.parquet is not a readable Parquet file"):
        sluice.parquet(str(tmp_path / "junk.parquet")).schema
    data = (tmp_path / "part-0.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[:len(data) // 2])
    with pytest.raises(sluice.InvalidArgumentError, match=r"cut\.parquet is not a readable Parquet file"):
        sluice.parquet(str(tmp_path / "cut.parquet")).schema
    with pytest.raises(sluice.InvalidArgumentError, match="column 'id' is asked for twice"):
        sluice.parquet(pattern, ["id", "blob", "id"]).schema
    with pytest.raises(sluice.NotFoundError, match="nothing.parquet"):
        sluice.parquet(str(tmp_path / "nothing.parquet")).schema


def test_a_null_is_a_named_corrupt_record_or_a_counted_skip(tmp_path):
    t = pa.table({"id": pa.array([0, 1, None, 3, 4, None, 6], pa.int64()),
                  "emb": pa.FixedSizeListArray.from_arrays(pa.array([float(i) for i in range(14)]), 2)})
    pq.write_table(t, tmp_path / "nulls.parquet", row_group_size=4)
    with pytest.raises(sluice.DataLossError, match=r"column 'id' is null in row 2 of Parquet file .*nulls\.parquet"):
        list(sluice.parquet(str(tmp_path / "nulls.parquet"), shuffle=False))
    it = sluice.parquet(str(tmp_path / "nulls.parquet"), shuffle=False, on_corrupt="skip").batch(10).engine.iterate(0)
    b = it.next_numpy()
    assert b["id"].tolist() == [0, 1, 3, 4, 6] and it.skipped == 2
    np.testing.assert_array_equal(b["emb"][:, 0], [0, 2, 6, 8, 12])


@pytest.mark.parametrize("source", ["parquet", "from_arrow"])
def test_shuffled_rows_with_nulls_name_the_null_rows_and_skip_only_them(tmp_path, source):
    t = pa.table({"id": pa.array([0, 1, None, 3, 4, None, 6, 7], pa.int64())})
    pq.write_table(t, tmp_path / "nulls.parquet")

    def pipe(on_corrupt):
        if source == "parquet":
            return sluice.parquet(str(tmp_path / "nulls.parquet"), shuffle=True, on_corrupt=on_corrupt)
        return sluice.from_arrow(t, shuffle=True, on_corrupt=on_corrupt)
    with pytest.raises(sluice.DataLossError, match=r"column 'id' is null in row [25] of"):
        list(pipe("error"))
    it = pipe("skip").batch(10).engine.iterate(0)
    got = it.next_numpy()["id"].tolist()
    assert sorted(got) == [0, 1, 3, 4, 6, 7] and got != sorted(got) and it.skipped == 2


@pytest.mark.parametrize("kind", ["parquet", "arrow_ipc"])
def test_a_shuffled_row_an_op_refuses_is_named_by_its_row_in_the_file(tmp_path, kind):
    # It was named by its place in the epoch's order: another row each epoch.
    images = [b"P5 2 2 255\n" + bytes([i, i, i, i]) for i in range(6)]  # netpbm, a decodable image
    images[4] = b"not an image"
    t = pa.table({"image": pa.array(images, pa.binary())})
    path = tmp_path / f"rows.{kind}"
    if kind == "parquet":
        pq.write_table(t, path, row_group_size=3)
    else:
        write_ipc(path, t, batch_rows=3)
    pipe = getattr(sluice, kind)(str(path), shuffle=True)
    with pytest.raises(sluice.DataLossError, match=f"record 4 of {path}: not a JPEG"):
        list(pipe.map(ops.decode_image(size=[2, 2])))
    for epoch in range(4):
        skipping = getattr(sluice, kind)(str(path), shuffle=True, on_corrupt="skip")
        it = skipping.map(ops.decode_image(size=[2, 2])).iterate(epoch)
        assert len(list(it)) == 5 and it.skipped == 1
        assert f"record 4 of {path}: not a JPEG" in it.skip_summary, it.skip_summary


def test_one_column_of_two_arrow_layouts_in_a_glob_is_named_not_read_by_the_first_files(tmp_path):
    # fixed_size_binary(2) and fixed_size_list<uint8, 2> both read as uint8[2];
    # the second file's rows were copied by the first's layout: other memory.
    pq.write_table(pa.table({"x": pa.array([b"ab", b"cd"], pa.binary(2))}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"x": pa.array([[1, 2], [3, 4]], pa.list_(pa.uint8(), 2))}), tmp_path / "b.parquet")
    with pytest.raises(sluice.InvalidArgumentError, match=r"column 'x' is fixed_size_binary\[2\] in .*a\.parquet but "
                                                          r"fixed_size_list<.*uint8>\[2\] in .*b\.parquet: .*cast"):
        sluice.parquet(str(tmp_path / "*.parquet")).schema


def test_a_parquet_file_replaced_after_its_listing_is_named_not_mixed_with_the_old(tmp_path):
    path = tmp_path / "replaced.parquet"
    pq.write_table(pa.table({"id": pa.array(np.arange(500), pa.int64())}), path, row_group_size=10)
    batches = iter(sluice.parquet(str(path), shuffle=False).batch(10))
    assert next(batches)["id"].tolist() == list(range(10))
    pq.write_table(pa.table({"id": pa.array(np.arange(1000, 1600), pa.int64())}), tmp_path / "new.parquet",
                   row_group_size=10)
    os.replace(tmp_path / "new.parquet", path)  # as a writer replaces a file
    with pytest.raises(sluice.DataLossError, match=r"replaced\.parquet changed after it was listed"):
        for b in batches:
            assert b["id"].max() < 500, "a row of the new file"


def test_a_parquet_page_whose_crc_fails_is_damage_where_the_writer_wrote_crcs(tmp_path):
    path = tmp_path / "crc.parquet"
    pq.write_table(pa.table({"v": pa.array([i * 1.5 for i in range(40)], pa.float64())}), path, row_group_size=10,
                   compression="none", use_dictionary=False, write_page_checksum=True)
    column = pq.ParquetFile(path).metadata.row_group(2).column(0)
    data = bytearray(path.read_bytes())
    data[column.data_page_offset + column.total_compressed_size - 5] ^= 0xFF  # row 29's value
    path.write_bytes(bytes(data))
    with pytest.raises(sluice.DataLossError, match=r"row group 2 of .*crc\.parquet: .*CRC"):
        list(sluice.parquet(str(path), shuffle=False))
    it = sluice.parquet(str(path), shuffle=False, on_corrupt="skip").iterate(0)
    assert [float(r["v"]) for r in it] == [i * 1.5 for i in range(40) if not 20 <= i < 30] and it.skipped == 10


def test_from_arrow_reads_a_table_and_hands_out_copies_a_write_never_reaches(tmp_path):
    t = pa.Table.from_batches(table().to_batches(max_chunksize=16))
    pipe = sluice.from_arrow(t, shuffle=False)
    check_rows(rows_of(pipe), t)
    # The pipeline reads the table's buffers in place; what it hands out is
    # its own copy, so a training loop's in-place write leaves the table
    # (immutable, as Arrow's data is) and the next epoch as they were.
    ids, emb = t.column("id").to_pylist(), t.column("emb").to_pylist()
    for row in pipe:
        row["id"][...] = -1
        row["emb"][...] = 0
    assert t.column("id").to_pylist() == ids and t.column("emb").to_pylist() == emb
    check_rows(rows_of(pipe), t)


def test_from_arrow_takes_any_arrow_c_stream_and_splits_by_batch():
    t = pa.Table.from_batches(table(rows=100).to_batches(max_chunksize=10))

    class Frame:  # what Polars, Lance and DuckDB hand out: the PyCapsule stream protocol
        def __arrow_c_stream__(self, requested_schema=None):
            return t.__arrow_c_stream__(requested_schema)

    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=10))
    for data in (Frame(), reader):
        pipe = sluice.from_arrow(data, ["id", "grid"]).batch(32)
        orders = [[i for b in pipe for i in b["id"].tolist()] for _ in range(2)]
        for seen in orders:
            assert sorted(seen) == list(range(100))
        assert orders[0] != orders[1]  # batches reshuffled every epoch
    with pytest.raises(TypeError, match="__arrow_c_stream__"):
        sluice.from_arrow([1, 2, 3])
    with pytest.raises(sluice.InvalidArgumentError, match="no column 'nope'"):
        sluice.from_arrow(t, ["nope"]).schema


_RESUME_OVER_ARROW = r"""
import sys
import numpy as np
import pyarrow as pa
import sluice
ids = pa.table({"id": np.arange(int(sys.argv[1]), int(sys.argv[1]) + 100, dtype=np.int64)})
pipe = sluice.from_arrow(pa.Table.from_batches(ids.to_batches(max_chunksize=25)), shuffle=False).batch(10)
try:
    print(" ".join(str(i) for b in pipe.iterate(state=open(sys.argv[2], "rb").read()) for i in b["id"].tolist()))
except sluice.InvalidArgumentError as e:
    print("refused:", e)
"""


def test_a_state_over_in_memory_arrow_data_resumes_over_the_same_data_and_is_refused_over_other(tmp_path):
    # The data was named by a count of the process's holds: the same table
    # held again was refused, and other data in a fresh process accepted.
    def pipe(first):
        ids = pa.table({"id": np.arange(first, first + 100, dtype=np.int64)})
        return sluice.from_arrow(pa.Table.from_batches(ids.to_batches(max_chunksize=25)), shuffle=False).batch(10)
    it = pipe(0).iterate(0)
    assert [next(it)["id"].tolist() for _ in range(2)][1] == list(range(10, 20))
    (tmp_path / "state").write_bytes(it.state())
    assert [i for b in pipe(0).iterate(state=it.state()) for i in b["id"].tolist()] == list(range(20, 100))
    (tmp_path / "resume.py").write_text(_RESUME_OVER_ARROW)
    for first, want in (("0", " ".join(str(i) for i in range(20, 100))), ("1000", "refused:")):
        ran = subprocess.run([sys.executable, str(tmp_path / "resume.py"), first, str(tmp_path / "state")],
                             capture_output=True, text=True, timeout=120)
        assert ran.stdout.startswith(want), ran.stdout + ran.stderr


def test_bad_arrow_ipc_files_are_named(tmp_path):
    (tmp_path / "junk.arrow").write_bytes(b"ARROW1 but nothing after")
    with pytest.raises(sluice.InvalidArgumentError, match=r"junk\.arrow is not a readable Arrow IPC file"):
        sluice.arrow_ipc(str(tmp_path / "junk.arrow")).schema
    write_ipc(tmp_path / "t.arrow", table(), batch_rows=9)
    data = (tmp_path / "t.arrow").read_bytes()
    (tmp_path / "cut.arrow").write_bytes(data[:len(data) - 100])  # the footer gone
    with pytest.raises(sluice.InvalidArgumentError, match=r"cut\.arrow is not a readable Arrow IPC file"):
        sluice.arrow_ipc(str(tmp_path / "cut.arrow")).schema


def test_a_damaged_arrow_ipc_record_batch_is_its_own_error_not_the_listings(tmp_path):
    # The listing counts rows from the batches' headers: it read a column of
    # each batch before, and damage there failed the whole source, outside
    # on_corrupt.
    table = pa.table({"x": pa.array(np.arange(500) * 3), "s": [f"row{i}" * 3 for i in range(500)],
                      "y": pa.array(np.arange(500, dtype=np.int32))})
    with ipc.new_file(str(tmp_path / "t.arrow"), table.schema,
                      options=ipc.IpcWriteOptions(compression="zstd")) as writer:
        for batch in table.to_batches(max_chunksize=100):
            writer.write_batch(batch)
    data = bytearray((tmp_path / "t.arrow").read_bytes())
    frames, at = [], data.find(b"\x28\xb5\x2f\xfd")
    while at >= 0:
        frames.append(at)
        at = data.find(b"\x28\xb5\x2f\xfd", at + 1)
    assert len(frames) == 5 * 4  # per batch: x's values, s's offsets and bytes, y's values
    data[frames[2 * 4]:frames[2 * 4] + 4] = b"\0\0\0\0"  # record batch 2's x
    (tmp_path / "t.arrow").write_bytes(bytes(data))
    pipe = sluice.arrow_ipc(str(tmp_path / "t.arrow"), ["y"], shuffle=False)
    assert [c[0] for c in pipe.schema] == ["y"]  # listed
    with pytest.raises(sluice.DataLossError, match=r"record batch 2 of .*t\.arrow"):
        list(pipe.batch(50))
    kept = sluice.arrow_ipc(str(tmp_path / "t.arrow"), ["y"], shuffle=False, on_corrupt="skip").batch(50)
    assert np.concatenate([b["y"] for b in kept]).tolist() == [*range(200), *range(300, 500)]


def test_a_flipped_bit_in_an_arrow_ipc_files_first_batch_is_an_error_or_no_change(tmp_path):
    # One bit flipped in each byte of the file's start (its schema and first
    # record batch's header): sluice raises, or reads what was written, or
    # what pyarrow reads from the damaged file; never fewer rows unsaid. A
    # header whose length field read as absent listed its batch as empty.
    t = pa.table({"id": pa.array(np.arange(60, dtype=np.int64)),
                  "b": pa.array([b"xyz"[: i % 3 + 1] * 2 for i in range(60)], pa.binary())})
    write_ipc(tmp_path / "t.arrow", t, batch_rows=6)
    data = (tmp_path / "t.arrow").read_bytes()
    want = list(zip(t["id"].to_pylist(), t["b"].to_pylist()))
    for at in range(8, 400):
        damaged = bytearray(data)
        damaged[at] ^= 1 << (at % 8)
        (tmp_path / "d.arrow").write_bytes(bytes(damaged))
        try:
            got = [(int(r["id"]), bytes(r["b"])) for r in sluice.arrow_ipc(str(tmp_path / "d.arrow"), shuffle=False)]
        except (sluice.DataLossError, sluice.InvalidArgumentError):
            continue
        if got == want:
            continue
        try:
            theirs = ipc.open_file(str(tmp_path / "d.arrow")).read_all()
        except Exception:  # pyarrow refuses it: sluice must have too
            theirs = None
        assert theirs is not None and got == list(zip(theirs["id"].to_pylist(), theirs["b"].to_pylist())), at


def test_record_batch_rows_come_from_the_headers_of_any_writer(tmp_path):
    # Empty batches, one of a million rows, a footer of many batches, no
    # fixed-width column, feather's defaults: as pyarrow counts them.
    big = pa.table({"s": pa.array(["a"] * 1_000_000)})
    many = pa.table({"b": pa.array([b"xy"] * 3000, pa.binary())})
    cases = {"empty.arrow": (table().slice(0, 0), 4), "big.arrow": (big, None), "many.arrow": (many, 1)}
    for name, (t, rows) in cases.items():
        with ipc.new_file(str(tmp_path / name), t.schema) as writer:
            writer.write_table(t, max_chunksize=rows)
            if name == "empty.arrow":
                writer.write_table(table(), max_chunksize=4)
                writer.write_table(table().slice(0, 0))
    feather.write_feather(table(), str(tmp_path / "f.feather"), chunksize=5)
    for name in [*cases, "f.feather"]:
        expected = ipc.open_file(str(tmp_path / name)).read_all()
        assert sum(len(next(iter(b.values()))) for b in sluice.arrow_ipc(str(tmp_path / name), shuffle=False)
                   .batch(4096)) == expected.num_rows


def test_record_batches_are_read_where_the_listing_found_them_and_a_changed_file_is_named(tmp_path):
    # Each batch is read from its block as listed, not through the footer
    # (parsed whole for every batch before). Many small batches, shuffled:
    # every row once; a dictionary column (read through the footer, which
    # lists the dictionaries) beside the one asked for; a file rewritten
    # after its listing is DataLoss, never batches of the new file at the
    # old file's places.
    ids = np.arange(3000)
    t = pa.table({"id": pa.array(ids, pa.int64()),
                  "kind": pa.array([f"k{i % 4}" for i in ids]).dictionary_encode()})
    write_ipc(tmp_path / "many.arrow", t, batch_rows=2)
    got = np.concatenate([b["id"] for b in sluice.arrow_ipc(str(tmp_path / "many.arrow"), ["id"], shuffle=True)
                          .batch(500)])
    assert sorted(got.tolist()) == ids.tolist() and got.tolist() != ids.tolist()
    big = pa.table({"blob": pa.array([bytes(4096)] * 20_000, pa.binary())})  # 80 MB: more than the buffers hold
    write_ipc(tmp_path / "big.arrow", big, batch_rows=100)
    batches = iter(sluice.arrow_ipc(str(tmp_path / "big.arrow"), shuffle=False).batch(100))
    next(batches)
    write_ipc(tmp_path / "big.arrow", big.slice(0, 19_000), batch_rows=50)
    with pytest.raises(sluice.DataLossError, match=r"big\.arrow changed after it was listed"):
        list(batches)


def test_an_arrow_ipc_stream_is_refused_saying_how_to_read_it(tmp_path):
    with ipc.new_stream(str(tmp_path / "data-00000-of-00001.arrow"), table().schema) as writer:
        writer.write_table(table())  # what datasets' save_to_disk writes
    with pytest.raises(sluice.InvalidArgumentError, match=r"is an Arrow IPC stream.*ipc\.open_stream"):
        sluice.arrow_ipc(str(tmp_path / "data-00000-of-00001.arrow")).schema
    reader = ipc.open_stream(str(tmp_path / "data-00000-of-00001.arrow"))
    check_rows(rows_of(sluice.from_arrow(reader, shuffle=False)), table())


def test_a_stream_in_the_format_before_arrow_0_15_is_named_as_one(tmp_path):
    legacy = ipc.IpcWriteOptions(use_legacy_format=True)
    with ipc.new_stream(str(tmp_path / "old.arrows"), table().schema, options=legacy) as writer:
        writer.write_table(table())
    with pytest.raises(sluice.InvalidArgumentError, match=r"old\.arrows .*before Arrow 0\.15.*ipc\.open_stream"):
        sluice.arrow_ipc(str(tmp_path / "old.arrows")).schema
    (tmp_path / "text.arrow").write_bytes(b"not arrow at all, just text")
    with pytest.raises(sluice.InvalidArgumentError) as refused:
        sluice.arrow_ipc(str(tmp_path / "text.arrow")).schema
    assert "IPC stream" not in str(refused.value)

def test_one_column_name_is_a_column_not_its_letters(tmp_path):
    pattern = write_parquet(tmp_path, files=1)
    assert [c[0] for c in sluice.parquet(pattern, "id").schema] == ["id"]
    assert [c[0] for c in sluice.from_arrow(table(), "id").schema] == ["id"]


def test_a_hugging_face_dataset_reads_as_the_rows_its_mapping_leaves():
    import datasets  # Hugging Face's, installed by scripts/python_env.sh
    ds = datasets.Dataset.from_dict({"idx": list(range(300)), "label": [i % 3 for i in range(300)]})

    def ids(d, **kw):
        return [int(r["idx"]) for r in sluice.from_arrow(d, ["idx"], **kw)]
    assert sorted(ids(ds)) == list(range(300))
    kept = ds.filter(lambda r: r["label"] == 0)
    assert sorted(ids(kept)) == list(range(0, 300, 3))
    picked = ds.shuffle(seed=1).select(range(10))
    assert ids(picked, shuffle=False) == picked["idx"]
    assert sorted(ids(ds.data)) == list(range(300))  # datasets' own Table wrapper


def test_a_hugging_face_image_column_reads_as_its_encoded_bytes(tmp_path):
    import cv2
    import datasets  # Hugging Face's, installed by scripts/python_env.sh
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (10, 9, 3), np.uint8) for _ in range(12)]
    encoded = [{"bytes": cv2.imencode(".png", im[..., ::-1])[1].tobytes(), "path": None} for im in images]
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    ds = datasets.Dataset.from_dict({"image": encoded, "label": list(range(12))}, features=features)
    ds.to_parquet(str(tmp_path / "train-00000-of-00001.parquet"))  # image: struct<bytes, path>
    rows = list(sluice.parquet(str(tmp_path / "*.parquet"), ["image", "label"], shuffle=False)
                .map(ops.decode_image(field="image", size=[10, 9])))
    assert [int(r["label"]) for r in rows] == list(range(12))
    for r, image in zip(rows, images):  # PNG: lossless, so equal to the pixels written
        np.testing.assert_array_equal(r["image"], image)
    # An image stored by its path only has no bytes: a corrupt record, named.
    t = pa.table({"image": pa.array([{"bytes": b"x", "path": None}, {"bytes": None, "path": "a.png"}],
                                    pa.struct([("bytes", pa.binary()), ("path", pa.string())]))})
    pq.write_table(t, tmp_path / "by_path.parquet")
    with pytest.raises(sluice.DataLossError, match=r"column 'image' has no bytes in row 1 of Parquet file .* \(stored "
                                                   r"by its path only, or null\): .* sluice\.file_list"):
        list(sluice.parquet(str(tmp_path / "by_path.parquet"), shuffle=False))


def test_image_columns_of_other_layouts_in_two_files_are_named_or_read_by_each_files_layout(tmp_path):
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    flipped = pa.struct([("path", pa.string()), ("bytes", pa.binary())])
    pq.write_table(pa.table({"image": pa.array([{"bytes": b"a0", "path": "p0"}], struct)}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"image": pa.array([b"b0"], pa.binary())}), tmp_path / "b.parquet")
    pq.write_table(pa.table({"image": pa.array([{"path": "p1", "bytes": b"c0"}], flipped)}), tmp_path / "c.parquet")
    with pytest.raises(sluice.InvalidArgumentError, match=r"column 'image' is a struct in .*a\.parquet but no struct"):
        sluice.parquet([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]).schema
    got = [bytes(r["image"]) for r in sluice.parquet([str(tmp_path / "a.parquet"), str(tmp_path / "c.parquet")],
                                                      shuffle=False)]
    assert got == [b"a0", b"c0"]


def test_a_list_column_says_how_to_cast_it(tmp_path):
    pq.write_table(pa.table({"tokens": pa.array([[1, 2], [3, 4]], pa.list_(pa.int32()))}), tmp_path / "t.parquet")
    with pytest.raises(sluice.InvalidArgumentError, match=r"list<.*fixed_size_list.*pa\.list_\(type, n\)"):
        sluice.parquet(str(tmp_path / "t.parquet")).schema


def test_a_uint64_column_says_how_to_cast_it(tmp_path):
    for name, column in (("ids", pa.array([1, 2], pa.uint64())),
                         ("pairs", pa.array([[1, 2], [3, 4]], pa.list_(pa.uint64(), 2)))):
        pq.write_table(pa.table({name: column}), tmp_path / f"{name}.parquet")
        with pytest.raises(sluice.InvalidArgumentError, match=rf"column '{name}' .*up to int64 and uint32.*"
                                                              r"cast it to int64 .*pa\.int64\(\)"):
            sluice.parquet(str(tmp_path / f"{name}.parquet")).schema

def test_parquet_runs_on_the_services_workers(tmp_path):
    # The embedded dispatcher's worker is a separate `sluice worker` process:
    # it reads the row groups in C++, each row exactly once.
    pattern = write_parquet(tmp_path, files=2, row_group_size=10)
    pipe = sluice.parquet(pattern, ["id", "emb"]).distribute(local_workers=1).batch(25)
    rows = [(int(i), e.tolist()) for b in pipe for i, e in zip(b["id"], b["emb"])]
    assert sorted(i for i, _ in rows) == list(range(2 * ROWS))
    want = {i: e for i, e in zip(pa.concat_tables([table(0), table(ROWS)])["id"].to_pylist(),
                                 pa.concat_tables([table(0), table(ROWS)])["emb"].to_pylist())}
    for i, e in rows:
        np.testing.assert_array_equal(np.float32(e), np.float32(want[i]))
