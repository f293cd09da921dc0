"""The `sluice` command as users run it, from folders of their own: what
it writes runs from elsewhere, what it prints parses, and mistakes are
named before a run rather than after it."""

import json
import subprocess

import pytest


def sluice(*args, cwd=None):
    return subprocess.run(["sluice", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def write_pipeline(path, cifar_dir, batch=32):
    path.write_text(json.dumps({"nodes": [
        {"source": {"tfrecord": {"files": [str(cifar_dir / "*.tfrecord")],
                                 "features": [{"name": "image", "dtype": "bytes", "length": 3072},
                                              {"name": "label", "dtype": "int64"}]}}},
        {"map": {"ops": [{"op": "reshape", "attrs": {"shape": [32, 32, 3]}},
                         {"op": "grey_dilation", "attrs": {"size": 3}}]}},
        {"batch": {"size": batch}}]}))
    return path


def test_a_materialized_pipeline_runs_from_any_folder(cifar_dir, tmp_path):
    (tmp_path / "work").mkdir()
    write_pipeline(tmp_path / "work" / "p.json", cifar_dir)
    made = sluice("materialize", "p.json", "--out", "m", cwd=tmp_path / "work")
    assert made.returncode == 0, made.stderr
    ran = sluice("run", str(tmp_path / "work" / "m" / "pipeline.json"), "--json", "--quiet", cwd="/")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.splitlines()[-1])["samples"] == 300


def test_the_json_summary_parses_whatever_the_pipelines_path(cifar_dir, tmp_path):
    odd = write_pipeline(tmp_path / 'we"ird\\name.json', cifar_dir)
    ran = sluice("run", str(odd), "--json", "--quiet")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.splitlines()[-1])["pipeline"] == str(odd)


def test_the_warning_counts_the_records_every_epoch_skipped(cifar_dir, tmp_path):
    damaged = tmp_path / "damaged.tfrecord"
    data = bytearray(sorted(cifar_dir.glob("*.tfrecord"))[0].read_bytes())
    data[len(data) // 2] ^= 0x40  # inside one record's data: its CRC fails
    damaged.write_bytes(bytes(data))
    pipeline = json.loads(write_pipeline(tmp_path / "p.json", cifar_dir, batch=1).read_text())
    pipeline["nodes"][0]["source"]["tfrecord"]["files"] = [str(damaged)]
    pipeline["nodes"][0]["source"]["on_corrupt"] = "skip"
    (tmp_path / "p.json").write_text(json.dumps(pipeline))
    ran = sluice("run", str(tmp_path / "p.json"), "--epochs", "3", "--json", "--quiet")
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout.splitlines()[-1])
    assert summary["skipped_records"] == 3 and summary["samples"] == 3 * 99
    assert "3 corrupt records skipped in 3 epochs, the same in each: skipped 1 corrupt record" in ran.stderr
    assert "damaged.tfrecord" in ran.stderr

def test_the_budget_and_the_decoded_row_groups_are_printed_as_they_are(tmp_path):
    # A budget of 3 MiB less a byte printed "2 MiB", 200,000 bytes "0 MiB";
    # the row groups a Parquet source decoded were left out.
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"image": pa.array([bytes(4096)] * 2000, pa.binary()), "label": list(range(2000))}),
                   tmp_path / "t.parquet", row_group_size=500, compression="none")
    pipeline = json.loads(write_pipeline(tmp_path / "p.json", tmp_path).read_text())
    pipeline["nodes"] = [{"source": {"parquet": {"files": [str(tmp_path / "t.parquet")]}}}, {"batch": {"size": 50}}]
    for budget, shown in ((3 * 2**20 - 1, "3.0 MiB"), (8 * 2**20, "8 MiB")):
        pipeline["options"] = {"memory_budget_bytes": budget}
        (tmp_path / "p.json").write_text(json.dumps(pipeline))
        ran = sluice("run", str(tmp_path / "p.json"))
        assert ran.returncode == 0, ran.stderr
        assert f"memory budget {shown} (set)" in ran.stdout, ran.stdout
        assert "MB of decoded row groups" in ran.stdout, ran.stdout
    summary = json.loads(sluice("run", str(tmp_path / "p.json"), "--json", "--quiet").stdout.splitlines()[-1])
    assert 500 * 4096 <= summary["columnar_peak_bytes"] <= 4 * 500 * 4096, summary


def test_mistakes_are_named_before_the_run(cifar_dir, tmp_path):
    p = write_pipeline(tmp_path / "p.json", cifar_dir)
    into_folder = sluice("run", str(p), "--stop-after", "2", "--save-state", str(tmp_path))
    assert into_folder.returncode == 1
    assert f"--save-state {tmp_path} is a directory" in into_folder.stderr
    assert not (tmp_path.parent / f"{tmp_path.name}.tmp").exists()
    nowhere = sluice("run", str(p), "--stop-after", "2", "--save-state", str(tmp_path / "no" / "s.state"))
    assert f"NOT_FOUND: --save-state {tmp_path}/no/s.state: no folder {tmp_path}/no" in nowhere.stderr
    folder = sluice("run", str(tmp_path))
    assert f"'{tmp_path}' is a directory, not a pipeline's JSON file" in folder.stderr
    p.write_text(p.read_text().replace('"nodes": [', '"nodes": [\n', 1).replace("}}]}", "}},]}", 1))
    syntax = sluice("run", str(p))
    assert "invalid pipeline JSON: parse error at line 2" in syntax.stderr, syntax.stderr


def test_a_seed_is_any_uint64_and_another_number_is_refused(cifar_dir, tmp_path):
    # -1 ran the pipeline's own seed, and 2**64 ran 2**63 - 1: neither said so.
    p = write_pipeline(tmp_path / "p.json", cifar_dir)
    for command in (["run", str(p), "--quiet"], ["make-data", "mnist", "--count", "6", "--out", str(tmp_path / "m")]):
        for bad in ("-1", "18446744073709551616", "1e3"):
            ran = sluice(*command, f"--seed={bad}")
            assert ran.returncode != 0, (bad, ran)
            assert f"--seed: must be a whole number from 0 to 18446744073709551615, got '{bad}'" in ran.stderr, ran
        assert sluice(*command, "--seed", "18446744073709551615").returncode == 0


def test_a_batch_no_machine_can_hold_is_refused_by_name(cifar_dir, tmp_path):
    p = write_pipeline(tmp_path / "p.json", cifar_dir, batch=10 ** 9)
    ran = sluice("run", str(p))
    assert ran.returncode == 1, ran.stderr  # not killed by the allocator
    assert "more than the" in ran.stderr and "make the batch, the shuffle buffer or the splits smaller" in ran.stderr


def test_a_relative_path_not_found_says_where_it_was_looked_for(tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"nodes": [{"source": {"tfrecord": {"files": ["data/*.tfrecord"]}}}]}))
    ran = sluice("run", str(p), cwd=tmp_path)
    assert f"(a relative path, taken from the current folder {tmp_path})" in ran.stderr, ran.stderr


def test_make_data_writes_no_empty_files(tmp_path):
    made = sluice("make-data", "cifar10", "--format", "bin", "--count", "5", "--out", str(tmp_path / "c"))
    assert made.returncode == 0, made.stderr
    assert sorted(f.stat().st_size for f in (tmp_path / "c").iterdir()) == [3073] * 5


def test_make_data_into_a_folder_it_cannot_create_says_why(tmp_path):
    (tmp_path / "file").write_text("x")
    for dataset in ("mnist", "cifar10", "imagenet"):
        made = sluice("make-data", dataset, "--count", "5", "--out", str(tmp_path / "file" / "out"))
        assert made.returncode != 0
        assert "NOT_FOUND: cannot create " + str(tmp_path / "file" / "out") in made.stderr, made.stderr
        assert "Not a directory" in made.stderr and "UNKNOWN" not in made.stderr, made.stderr

@pytest.mark.parametrize("command", [["make-data", "mnist", "--count", "5"], ["materialize", "p.json"]])
def test_an_empty_out_is_refused_not_taken_for_the_root_folder(tmp_path, command):
    # An unset shell variable, `--out "$OUT"`: it wrote under /.
    ran = sluice(*command, "--out", "", cwd=tmp_path)
    assert ran.returncode != 0 and "--out: must not be empty" in ran.stderr, ran


@pytest.mark.parametrize("args, message", [
    (["mnist", "--files", "3"], "--files applies to cifar10 and to imagenet with --format tfrecord, not to mnist"),
    (["imagenet", "--files", "3"], "not to imagenet as class folders"),
    (["cifar10", "--classes", "3"], "--classes applies to imagenet, not to cifar10 (its 10 classes are fixed)"),
    (["mnist", "--count", "4294967296"], "--count must be from 1 to 4294967295 (an IDX file's most), got 4294967296"),
])
def test_make_data_refuses_an_option_it_would_not_use(tmp_path, args, message):
    ran = sluice("make-data", *args, "--out", str(tmp_path / "d"))
    assert ran.returncode == 1 and message in ran.stderr, ran
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").rglob("*"))


@pytest.mark.parametrize("dataset", [["cifar10"], ["imagenet", "--format", "tfrecord", "--count", "6"], ["mnist"]])
def test_make_data_writes_the_same_bytes_for_the_same_seed(tmp_path, dataset):
    # An Example's features went out in the order of a map that changes
    # from process to process.
    for out in ("a", "b"):
        made = sluice("make-data", *dataset, "--count", "40", "--out", str(tmp_path / out)) if len(dataset) == 1 \
            else sluice("make-data", *dataset, "--out", str(tmp_path / out))
        assert made.returncode == 0, made.stderr
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


@pytest.mark.parametrize("dataset", ["cifar10", "mnist"])
def test_make_data_that_fails_midway_leaves_the_files_before_it(tmp_path, dataset):
    """A write that fails (here the file size limit, as a full disk would)
    leaves the earlier dataset as it was: no file cut short, no mix."""
    import resource
    import signal
    out = tmp_path / "d"
    assert sluice("make-data", dataset, "--count", "600", "--out", str(out)).returncode == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def small_files():  # a write past it fails with EFBIG (its signal ignored)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
    ran = subprocess.run(["sluice", "make-data", dataset, "--count", "2000", "--seed", "7", "--out", str(out)],
                         capture_output=True, text=True, timeout=300, preexec_fn=small_files)
    assert ran.returncode != 0 and "cannot write" in ran.stderr, ran
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_inspect_reads_a_damaged_tfrecord_as_one_and_idx_files_of_any_rank(cifar_dir, tmp_path):
    import numpy as np
    # Its first length CRC damaged, at a size CIFAR-10 binary divides: it
    # was shown as CIFAR-10 records, exit 0.
    data = bytearray(sorted(cifar_dir.glob("*.tfrecord"))[0].read_bytes()[:3073 * 4])
    data[8] ^= 1
    (tmp_path / "bad.tfrecord").write_bytes(bytes(data))
    ran = sluice("inspect", str(tmp_path / "bad.tfrecord"))
    assert ran.returncode == 1 and "DATA_LOSS: corrupted record (length crc mismatch)" in ran.stderr, ran
    for dims in ([], [3, 2], [2, 3, 4, 2]):
        values = np.arange(int(np.prod(dims)), dtype=np.uint8).reshape(dims)
        path = tmp_path / f"rank{len(dims)}.idx"
        path.write_bytes(bytes([0, 0, 8, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims) + values.tobytes())
        ran = sluice("inspect", str(path), "--json", "--limit", "0")
        assert ran.returncode == 0, ran.stderr
        assert f"IDX uint8, shape [{','.join(map(str, dims))}]" in ran.stderr
        rows = [json.loads(line) for line in ran.stdout.splitlines()]
        assert [r["index"] for r in rows] == list(range(dims[0] if dims else 1))
        if len(dims) > 1:
            assert [r["max"] for r in rows] == [int(v.max()) for v in values]
        else:
            assert rows == [{"index": 0, "value": 0}]
    assert sluice("inspect", str(path), "--limit", "-1").returncode != 0


def test_inspect_prints_cifar_records_as_json(tmp_path):
    assert sluice("make-data", "cifar10", "--format", "bin", "--count", "3", "--files", "1",
                  "--out", str(tmp_path)).returncode == 0
    ran = sluice("inspect", str(tmp_path / "data_batch_1.bin"), "--json")
    rows = [json.loads(line) for line in ran.stdout.splitlines()]
    raw = (tmp_path / "data_batch_1.bin").read_bytes()
    assert [r["label"] for r in rows] == [raw[i * 3073] for i in range(3)]
    assert all(len(r["mean_rgb"]) == 3 for r in rows)


def test_a_failed_index_leaves_no_temporary_file(cifar_dir, tmp_path):
    record = tmp_path / "a.tfrecord"
    record.write_bytes(sorted(cifar_dir.glob("*.tfrecord"))[0].read_bytes())
    (tmp_path / "a.tfrecord.index").mkdir()  # where the index would go
    ran = sluice("index", str(record))
    assert ran.returncode == 1 and f"cannot write {record}.index" in ran.stderr, ran.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tfrecord", "a.tfrecord.index"]


@pytest.mark.parametrize("first, second, left", [
    (["cifar10", "--files", "4"], ["cifar10", "--files", "2"], "train-0000"),
    (["cifar10", "--format", "bin", "--files", "4"], ["cifar10", "--format", "bin", "--files", "2"], "data_batch_"),
    (["cifar10", "--files", "2"], ["cifar10", "--format", "bin", "--files", "2"], "train-0000"),
    (["imagenet", "--count", "12"], ["imagenet", "--count", "8"], "img_00000"),
    (["imagenet", "--count", "8"], ["imagenet", "--count", "8", "--classes", "4"], "img_00000"),
])
def test_make_data_over_an_earlier_dataset_it_would_not_replace_is_refused(tmp_path, first, second, left):
    out = tmp_path / "d"
    assert sluice("make-data", *first, "--out", str(out)).returncode == 0
    (out / "notes.txt").write_text("the user's")
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    again = sluice("make-data", *second, "--out", str(out))
    assert again.returncode == 1
    assert f"{out} holds " in again.stderr and "of an earlier make-data that this one would not replace" in again.stderr
    assert left in again.stderr, again.stderr
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # nothing written, nothing deleted
    # The same again replaces every file it wrote.
    assert sluice("make-data", *first, "--out", str(out)).returncode == 0



def test_a_port_in_use_and_a_negative_rate_are_one_line_each():
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        dispatcher = subprocess.run(["sluice", "dispatcher", "--host", "127.0.0.1", "--port",
                                     str(taken.getsockname()[1])], capture_output=True, text=True, timeout=60)
    finally:
        taken.close()
    assert dispatcher.returncode == 1
    assert "chttp2" not in dispatcher.stderr and "created_time" not in dispatcher.stderr  # gRPC's own record
    assert len(dispatcher.stderr.strip().splitlines()) == 1, dispatcher.stderr
    profile = subprocess.run(["sluice", "profile", "p.json", "--consumer-rate", "-5"], capture_output=True, text=True)
    assert profile.returncode != 0
    assert "--consumer-rate: must be >= 0, got -5" in profile.stderr
    assert "1797" not in profile.stderr  # DBL_MAX's digits
    profile = subprocess.run(["sluice", "profile", "p.json", "--consumer-rate", "abc"], capture_output=True, text=True)
    assert profile.returncode != 0 and "--consumer-rate: must be a number, got abc" in profile.stderr


@pytest.mark.parametrize("command, flag, value", [
    ("dispatcher", "--max-threads", "-1"),
    ("dispatcher", "--max-batch-bytes", "0"),
    ("dispatcher", "--max-buffer-bytes", "-4096"),
    ("dispatcher", "--journal-compact-bytes", "-5"),
    ("worker", "--idle-pipeline-timeout", "0"),
])
def test_a_service_limit_below_one_is_refused_at_start_not_at_the_first_pipeline(command, flag, value):
    args = ["--dispatcher", "127.0.0.1:1"] if command == "worker" else []
    run = subprocess.run(["sluice", command, *args, flag, value], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert f"{flag}: must be > 0, got {value}" in run.stderr
