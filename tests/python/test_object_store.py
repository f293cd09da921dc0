"""Sources reading objects from a real S3-compatible server (SeaweedFS on
127.0.0.1): the same bytes as the local files, errors that name the URL and
never a credential, and processes that exit cleanly after using the store."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import sluice
from conftest import TcpProxy, _free_ports, start_server
from http_faults import FaultProxy
from held_memory import MIB, read_watching, rss_anon, write_one_record_batch
from sluice import ops

CIFAR = {"image": ("bytes", 3072), "label": "int64"}
# A stalled body outlasts the client's wait for its next bytes.
STALL_S = 120


@pytest.fixture(scope="module")
def store(s3_store, cifar_dir, mnist_dir):
    s3_store.upload("train", sorted(cifar_dir.glob("*.tfrecord")), "cifar")
    s3_store.upload("train", sorted(mnist_dir.glob("*-ubyte")), "mnist")
    saved = dict(os.environ)
    os.environ.update(s3_store.env())
    yield s3_store
    os.environ.clear()
    os.environ.update(saved)


def augmented(files):
    return (sluice.tfrecord(files, CIFAR)
            .map(ops.reshape(shape=[32, 32, 3]), ops.random_flip(), ops.gaussian_blur(ksize=3, sigma=1.0))
            .batch(32).with_options(seed=7))


def assert_same_batches(a, b):
    a, b = list(a), list(b)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])


def test_a_glob_of_objects_gives_the_local_files_batches(store, cifar_dir):
    assert_same_batches(augmented("s3://train/cifar/*.tfrecord"), augmented(str(cifar_dir / "*.tfrecord")))


def test_keys_with_question_marks_and_percents_are_listed_and_named(store, cifar_dir):
    files = sorted(cifar_dir.glob("*.tfrecord"))[:3]
    names = ["what?.tfrecord", "100%.tfrecord", "a%3Fb.tfrecord"]
    for f, name in zip(files, names):
        store.put(f"train/odd/{name}", f.read_bytes())
    whole = sluice.tfrecord([str(f) for f in files], {"label": "int64"})
    listed = sluice.tfrecord("s3://train/odd/*.tfrecord", {"label": "int64"})
    # The listing's order is the keys' ("1" < "a" < "w").
    order = [files[1], files[2], files[0]]
    assert [int(r["label"]) for r in listed] == [int(r["label"]) for r in
                                                   sluice.tfrecord([str(f) for f in order], {"label": "int64"})]
    assert sum(1 for _ in whole) == sum(1 for _ in listed)
    # A key's own '?' is written %3F, its '%' before 25 or 3F %25.
    named = sluice.tfrecord("s3://train/odd/what%3F.tfrecord", {"label": "int64"})
    assert [int(r["label"]) for r in named] == [int(r["label"]) for r in sluice.tfrecord(str(files[0]),
                                                                                          {"label": "int64"})]
    assert sum(1 for _ in sluice.tfrecord("s3://train/odd/a%253Fb.tfrecord", {"label": "int64"})) > 0
    with pytest.raises(ValueError, match="a key's own '\\?' %3F"):
        sluice.tfrecord("s3://train/odd/what?.tfrecord", {"label": "int64"}).engine


def test_idx_objects_are_read_as_the_local_files(store, mnist_dir):
    def mnist(d):
        return sluice.mnist(f"{d}/train-images-idx3-ubyte", f"{d}/train-labels-idx1-ubyte").batch(100)
    assert_same_batches(mnist("s3://train/mnist"), mnist(str(mnist_dir)))


@pytest.mark.parametrize("url, message", [
    ("s3://train/cifar/nope-*.tfrecord", "no object matches pattern 's3://train/cifar/nope-*.tfrecord'"),
    ("s3://train/cifar/nope.tfrecord", "object not found: 's3://train/cifar/nope.tfrecord'"),
    ("s3://no-such-bucket/x.tfrecord",
     "object not found: 's3://no-such-bucket/x.tfrecord': the store has no bucket 'no-such-bucket'"),
    ("s3://no-such-bucket/cifar/*.tfrecord",
     "no object matches pattern 's3://no-such-bucket/cifar/*.tfrecord': the store has no bucket 'no-such-bucket'"),
])
def test_missing_objects_and_buckets_are_named(store, url, message):
    with pytest.raises(sluice.NotFoundError) as raised:
        list(sluice.tfrecord(url, CIFAR))
    assert message in str(raised.value)


def test_a_url_naming_a_prefix_fails_at_once_not_after_the_stores_timeout(store, cifar_dir, monkeypatch):
    # Asked again, a prefix stays one: it was retried for the whole timeout.
    monkeypatch.setenv("SLUICE_OBJECT_STORE_TIMEOUT_S", "600")
    name = sorted(cifar_dir.glob("*.tfrecord"))[0].name
    with pytest.raises(sluice.InvalidArgumentError) as raised:
        list(sluice.tfrecord(f"s3://train/cifar/{name}/", CIFAR))
    assert "a prefix, not an object" in str(raised.value) and "retried" not in str(raised.value)


def test_two_stars_in_an_object_pattern_match_keys_at_every_depth(store, cifar_dir):
    local = sorted(cifar_dir.glob("*.tfrecord"))
    for key, path in zip(["deep/a.tfrecord", "deep/x/b.tfrecord", "deep/x/y/c.tfrecord"], local):
        store.put(f"train/{key}", path.read_bytes())
    store.put("train/deep/x/notes.txt", b"not a record")
    pipe = sluice.tfrecord("s3://train/deep/**/*.tfrecord", CIFAR, shuffle_splits=False).batch(50)
    assert_same_batches(pipe, sluice.tfrecord([str(p) for p in local], CIFAR).batch(50))


def run_sluice_python(code, env):
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("profile", ["default", "local"])
def test_the_endpoint_of_the_profile_in_the_aws_config_file_is_the_stores(store, cifar_dir, tmp_path, profile):
    # As boto3 and the AWS CLI read it: the requests went to AWS itself.
    (tmp_path / ".aws").mkdir()
    section = "default" if profile == "default" else f"profile {profile}"
    (tmp_path / ".aws" / "config").write_text(f"[{section}]\nregion = us-east-1\nendpoint_url = {store.endpoint}/\n")
    env = {k: v for k, v in store.env(HOME=str(tmp_path), AWS_PROFILE=profile).items() if k != "AWS_ENDPOINT_URL"}
    count = "import sluice\nprint(sum(len(b['label']) for b in sluice.tfrecord('s3://train/cifar/*.tfrecord', " \
            "{'label': 'int64'}).batch(10)))"
    out = run_sluice_python(count, env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout) == 300
    # The environment's endpoint comes first.
    elsewhere = run_sluice_python(count, dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{_free_ports(1)[0]}",
                                              SLUICE_OBJECT_STORE_TIMEOUT_S="1"))
    assert elsewhere.returncode != 0 and "UnavailableError" in elsewhere.stderr, elsewhere.stderr[-3000:]


def test_inspect_reads_an_object_and_names_a_missing_bucket(store, cifar_dir):
    name = sorted(cifar_dir.glob("*.tfrecord"))[0].name
    read = subprocess.run(["sluice", "inspect", f"s3://train/cifar/{name}", "--limit", "1"], env=store.env(),
                          capture_output=True, text=True, timeout=120)
    assert read.returncode == 0 and "TFRecord, 100 records, all CRCs valid" in read.stderr, read.stdout + read.stderr
    missing = subprocess.run(["sluice", "inspect", "s3://nobucket/x.tfrecord"], env=store.env(), capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode != 0
    assert "the store has no bucket 'nobucket'" in missing.stderr, missing.stderr


def test_refused_credentials_name_the_url_and_never_the_secret(store):
    wrong = "wrong-secret-that-must-not-show"
    out = run_sluice_python("import sluice\nlist(sluice.tfrecord('s3://train/cifar/*.tfrecord', {'label': 'int64'}))",
                            store.env(AWS_SECRET_ACCESS_KEY=wrong))
    assert out.returncode != 0
    assert "s3://train/cifar/*.tfrecord" in out.stderr
    assert "SIGNATURE_DOES_NOT_MATCH" in out.stderr
    for secret in (wrong, store.secret_key):
        assert secret not in out.stderr + out.stdout


def test_a_refusal_without_credentials_says_none_were_found(store, tmp_path):
    env = {k: v for k, v in store.env(HOME=str(tmp_path), AWS_EC2_METADATA_DISABLED="true").items()
           if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE")}
    out = run_sluice_python("import sluice\nlist(sluice.tfrecord('s3://train/cifar/*.tfrecord', {'label': 'int64'}))",
                            env)
    assert "PermissionDeniedError" in out.stderr and "s3://train/cifar/*.tfrecord" in out.stderr, out.stderr
    assert "(no credentials were found for s3://train: set AWS_ACCESS_KEY_ID" in out.stderr, out.stderr
    # With credentials, a refusal does not say so.
    refused = run_sluice_python("import sluice\nlist(sluice.tfrecord('s3://train/cifar/*.tfrecord', {'label': 'int64'}))",
                                store.env(AWS_SECRET_ACCESS_KEY="wrong"))
    assert "PermissionDeniedError" in refused.stderr and "no credentials were found" not in refused.stderr
    assert "the store refused the credentials found" in refused.stderr, refused.stderr
    # A profile that names none says so.
    profiled = run_sluice_python("import sluice\nlist(sluice.tfrecord('s3://train/cifar/*.tfrecord', "
                                 "{'label': 'int64'}))", dict(env, AWS_PROFILE="nosuch"))
    assert "AWS_PROFILE is 'nosuch', and ~/.aws/credentials and ~/.aws/config gave none for it" in profiled.stderr, \
        profiled.stderr[-2000:]


def test_a_url_carrying_credentials_is_refused_without_printing_them(store):
    url = f"s3://{store.access_key}:{store.secret_key}@train/cifar/*.tfrecord"
    with pytest.raises(sluice.InvalidArgumentError) as raised:
        list(sluice.tfrecord(url, CIFAR))
    assert "must not carry credentials" in str(raised.value)
    assert store.secret_key not in str(raised.value)
    assert store.access_key not in str(raised.value)


@pytest.mark.parametrize("query", ["secret_key={secret}", "access_key={key}&secret_key={secret}",
                                   "region=us-east-1&session_token={secret}", "X-Amz-Signature={secret}"])
def test_a_query_carrying_credentials_is_refused_naming_the_parameter_only(store, query):
    url = "s3://train/cifar/*.tfrecord?" + query.format(key=store.access_key, secret=store.secret_key)
    with pytest.raises(sluice.InvalidArgumentError) as raised:
        list(sluice.tfrecord(url, CIFAR))
    assert "must not carry credentials" in str(raised.value)
    assert "s3://train/cifar/*.tfrecord?" in str(raised.value)
    assert store.secret_key not in str(raised.value)
    assert store.access_key not in str(raised.value)


def test_a_url_option_the_store_refuses_fails_and_the_process_exits_cleanly(store):
    # The AWS SDK starts before Arrow reads the URL's options: it must be
    # shut down at exit even though no client was made (it crashed there).
    code = ("import sluice\n"
            "try:\n    list(sluice.tfrecord('s3://train/cifar/*.tfrecord?tls_verify_certificates=maybe', "
            "{'label': 'int64'}))\n"
            "except sluice.InvalidArgumentError as e:\n    print('refused:', e)\n")
    for _ in range(4):
        out = run_sluice_python(code, store.env())
        assert out.returncode == 0, out.stderr
        assert "refused:" in out.stdout and "not a valid boolean value" in out.stdout


@pytest.mark.parametrize("url, message, hidden", [
    ("s3://train/cifar/*.tfrecord?sig=SECRETVALUE", "'sig' is not an option of the store (its value is not shown)",
     "SECRETVALUE"),
    ("s3://train/cifar/train-0000?-of-00003.tfrecord", "'?' starts an object URL's options", "-of-00003"),
    ("https://train.s3.example/cifar/x.tfrecord?X-Amz-Signature=SECRETVALUE",
     "sources read local paths and s3:// and gs:// URLs, not https://", "SECRETVALUE"),
    ("S3://train/cifar/*.tfrecord", "a URL's scheme is written in lower case (s3://)", "file not found"),
])
def test_a_url_no_store_takes_is_refused_saying_why_and_never_printing_its_query(store, url, message, hidden):
    with pytest.raises(sluice.InvalidArgumentError) as raised:
        list(sluice.tfrecord(url, CIFAR))
    assert message in str(raised.value)
    assert hidden not in str(raised.value)


def test_the_profile_knows_a_source_reads_objects_every_epoch_unless_cached(store, tmp_path):
    pipeline = json.loads(augmented("s3://train/cifar/*.tfrecord").to_json())
    cached = json.loads(json.dumps(pipeline))
    cached["nodes"][0]["source"]["object_cache"] = {"dir": str(tmp_path / "cache"), "max_bytes": 1 << 30}
    for definition, uncached in ((pipeline, True), (cached, False)):
        (tmp_path / "p.json").write_text(json.dumps(definition))
        run = subprocess.run(["sluice", "profile", str(tmp_path / "p.json"), "--seconds", "0.3", "--no-ablation",
                              "--json"], env=store.env(), capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout.splitlines()[-1])["uncached_objects"] is uncached


def test_the_command_and_a_process_with_pyarrow_exit_cleanly_after_reading(store, tmp_path):
    pipeline = json.loads(augmented("s3://train/cifar/*.tfrecord").to_json())
    (tmp_path / "p.json").write_text(json.dumps(pipeline))
    run = subprocess.run(["sluice", "run", str(tmp_path / "p.json"), "--epochs", "2", "--json"], env=store.env(),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["samples"] == 2 * 300
    # pyarrow's S3 and sluice's share one AWS SDK in one process.
    both = run_sluice_python(
        "import pyarrow.fs, sluice\n"
        "fs, path = pyarrow.fs.FileSystem.from_uri('s3://train/cifar')\n"
        "n = len(fs.get_file_info(pyarrow.fs.FileSelector(path)))\n"
        "rows = sum(len(b['label']) for b in sluice.tfrecord('s3://train/cifar/*.tfrecord', {'label': 'int64'}).batch(64))\n"
        "print(n, rows)\n", store.env())
    assert both.returncode == 0, both.stderr
    assert both.stdout.split() == ["3", "300"]
    for out in (run, both):
        assert "FinalizeS3 was not called" not in out.stderr


def upload_tree(store, root, bucket, prefix):
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        store.put(f"{bucket}/{prefix}/{path.relative_to(root)}", path.read_bytes())


def rows(pipe):
    return [{k: np.array(v) for k, v in row.items()} for row in pipe]


def assert_same_rows(a, b):
    assert_same_batches(rows(a), rows(b))


def test_webdataset_shards_and_parquet_objects_read_as_the_local_files(store, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from test_webdataset import shards
    (tmp_path / "wds").mkdir()
    (tmp_path / "pq").mkdir()
    local_shards = shards(tmp_path / "wds")
    fields = {"pixels": ("raw", "bytes", 60), "label": ("cls", "int64")}
    for i in range(2):
        table = pa.table({"id": pa.array(np.arange(i * 20, i * 20 + 20), pa.int64()),
                          "x": pa.array(np.linspace(0, 1, 20) + i, pa.float64())})
        pq.write_table(table, tmp_path / "pq" / f"part-{i}.parquet", row_group_size=6)
    upload_tree(store, tmp_path, "train", "tree")
    assert_same_rows(sluice.webdataset("s3://train/tree/wds/shard-*.tar", fields, shuffle=False),
                     sluice.webdataset(local_shards, fields, shuffle=False))
    assert_same_rows(sluice.parquet("s3://train/tree/pq/part-*.parquet", shuffle=False),
                     sluice.parquet(str(tmp_path / "pq" / "part-*.parquet"), shuffle=False))


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_an_arrow_ipc_objects_record_batch_is_reported_as_the_rss_it_holds(store, tmp_path, compression):
    # One record batch of 47 MiB: uncompressed, its columns are the very
    # buffers its GETs filled, which memory() did not count (RSS grew 127 MiB
    # for a batch of 118 MiB, memory() said 0).
    rows, size = 16000, 3072
    blob = write_one_record_batch(tmp_path / "t.arrow", rows, size, seed=7, compression=compression)
    store.put(f"train/ipc-{compression}/t.arrow", (tmp_path / "t.arrow").read_bytes())
    pipe = (sluice.arrow_ipc(f"s3://train/ipc-{compression}/t.arrow").batch(64)
            .with_options(memory_budget_bytes=16 * MIB, threads=1))
    most_columnar, most_held, grew, labels = read_watching(pipe, blob, size, "columnar", rss_anon)
    assert sorted(labels) == list(range(rows))
    assert most_columnar >= rows * size
    # RSS beyond what memory() held: the batches' Python objects, a few MiB.
    assert grew <= most_held + 12 * MIB, f"RSS grew {grew / MIB:.0f} MiB, held at most {most_held / MIB:.0f} MiB"


def test_braces_in_an_object_url_name_the_shards_in_their_order(store, tmp_path):
    from test_webdataset import shards
    local = shards(tmp_path)  # shard-000.tar .. shard-003.tar
    upload_tree(store, tmp_path, "train", "braces")
    fields = {"key": "__key__", "label": ("cls", "int64")}

    def keyed(files):
        return [(bytes(r["key"]), int(r["label"])) for r in sluice.webdataset(files, fields, shuffle=False)]
    expected = keyed([local.replace("*", n) for n in ("003", "001", "002")])
    assert len(expected) == 75
    assert keyed("s3://train/braces/shard-{003,{001..002}}.tar") == expected
    with pytest.raises(sluice.NotFoundError, match=r"s3://train/braces/shard-004\.tar"):
        keyed("s3://train/braces/shard-{003..004}.tar")


def test_an_image_folder_and_a_file_list_in_a_bucket_read_as_local_ones(store, tmp_path):
    import cv2
    root = tmp_path / "images"
    for i, (label, ext) in enumerate([("cat", "png"), ("cat", "jpg"), ("dog", "png"), ("emu", "jpeg")]):
        (root / label).mkdir(parents=True, exist_ok=True)
        image = np.full((6 + i, 5, 3), 40 * i, np.uint8)
        (root / label / f"{i}.{ext}").write_bytes(cv2.imencode(f".{ext}", image)[1].tobytes())
    # "..": resolved as on disk (the store took it for letters of a key).
    (root / "list.txt").write_text("dog/2.png 1\ncat/../cat/0.png 0\n")
    upload_tree(store, root, "train", "images")
    folder = rows(sluice.image_folder("s3://train/images", shuffle=False))
    assert [int(r["label"]) for r in folder] == [0, 0, 1, 2]
    assert_same_rows(sluice.image_folder("s3://train/images/", shuffle=False),
                     sluice.image_folder(str(root), shuffle=False))
    assert_same_rows(sluice.file_list("s3://train/images/list.txt", shuffle=False),
                     sluice.file_list(str(root / "list.txt"), shuffle=False))
    # A class folder without images keeps its label, as on disk, when an
    # object is in it: a folder marker ("bat/", as consoles make).
    (root / "bat").mkdir()
    store.client.create_dir("train/images/bat")  # an empty object "bat/"
    assert [int(r["label"]) for r in rows(sluice.image_folder(str(root), shuffle=False))] == [1, 1, 2, 3]
    assert_same_rows(sluice.image_folder("s3://train/images", shuffle=False),
                     sluice.image_folder(str(root), shuffle=False))
    assert_same_rows(sluice.image_folder("s3://train/images?region=us-east-1", shuffle=False),
                     sluice.image_folder(str(root), shuffle=False))  # the URL's options after the folders
    with pytest.raises(ValueError, match="s3://train/images/cat/0.png is an object, not a folder of them"):
        sluice.image_folder("s3://train/images/cat/0.png").engine


def test_reads_spanning_many_fetched_blocks_give_the_same_bytes(store, cifar_dir, mnist_dir, monkeypatch):
    # Blocks far smaller than a record, the first shorter still: every read
    # spans several, and the IDX source's reads at offsets restart the
    # blocks fetched ahead.
    monkeypatch.setenv("SLUICE_OBJECT_BLOCK_BYTES", "1000")
    monkeypatch.setenv("SLUICE_OBJECT_FIRST_BLOCK_BYTES", "300")
    monkeypatch.setenv("SLUICE_OBJECT_READ_AHEAD", "3")
    assert_same_batches(augmented("s3://train/cifar/*.tfrecord"), augmented(str(cifar_dir / "*.tfrecord")))

    def mnist(d):
        return sluice.mnist(f"{d}/train-images-idx3-ubyte", f"{d}/train-labels-idx1-ubyte").shuffle(64).batch(50)
    assert_same_batches(mnist("s3://train/mnist"), mnist(str(mnist_dir)))


def test_a_store_that_goes_away_mid_epoch_is_waited_for_and_nothing_is_lost(store, tmp_path, monkeypatch):
    subprocess.run(["sluice", "make-data", "cifar10", "--out", str(tmp_path / "data"), "--count", "3000",
                    "--files", "2"], check=True, capture_output=True)
    store.upload("faults", sorted((tmp_path / "data").glob("*.tfrecord")), "cifar")
    # The store is reached through a proxy that cuts the network for 2 s.
    proxy = TcpProxy(int(store.endpoint.rsplit(":", 1)[1]))
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("SLUICE_OBJECT_BLOCK_BYTES", "16384")  # the reads go on hitting the store
    monkeypatch.setenv("SLUICE_OBJECT_READ_AHEAD", "1")

    def labels(files):
        it = iter(sluice.tfrecord(files, CIFAR).batch(100))
        first = next(it)
        if files.startswith("s3://"):
            proxy.cut()
            threading.Timer(2.0, proxy.mend).start()
        return np.concatenate([first["label"], *(b["label"] for b in it)])
    retried = sluice.object_store_stats()["retries"]
    np.testing.assert_array_equal(labels("s3://faults/cifar/*.tfrecord"),
                                  labels(str(tmp_path / "data" / "*.tfrecord")))
    assert sluice.object_store_stats()["retries"] > retried


_LISTING_A_DEAD_STORE = """
import signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import sluice
main = threading.main_thread().ident


def announce():  # once the main thread makes the engine, whose listing retries the store
    while sys._current_frames()[main].f_code.co_name != "engine":
        time.sleep(0.001)
    print("listing", flush=True)


threading.Thread(target=announce, daemon=True).start()
try:
    sluice.tfrecord("s3://train/cifar/*.tfrecord", {"label": "int64"}).engine
except KeyboardInterrupt:
    print("interrupted", flush=True)
print("after", len(list(sluice.arrays({"x": [1, 2, 3]}))), flush=True)
"""


def test_ctrl_c_stops_a_listing_that_waits_for_a_store(tmp_path):
    import signal
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{_free_ports(1)[0]}", AWS_ACCESS_KEY_ID="AKIANOBODY",
               AWS_SECRET_ACCESS_KEY="nobody-secret", SLUICE_OBJECT_STORE_TIMEOUT_S="600")
    child = subprocess.Popen([sys.executable, "-c", _LISTING_A_DEAD_STORE], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "listing"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)  # a hang guard: the store's timeout is 600 s
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert out.split() == ["interrupted", "after", "3"]


def test_a_store_gone_past_the_timeout_fails_saying_so(tmp_path):
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{_free_ports(1)[0]}", AWS_ACCESS_KEY_ID="AKIANOBODY",
               AWS_SECRET_ACCESS_KEY="nobody-secret", AWS_REGION="us-east-1", SLUICE_OBJECT_STORE_TIMEOUT_S="2")
    out = run_sluice_python("import sluice\nlist(sluice.tfrecord('s3://gone/*.tfrecord', {'label': 'int64'}))", env)
    assert out.returncode != 0
    assert "s3://gone/*.tfrecord" in out.stderr or "s3://gone" in out.stderr
    assert re.search(r"retried for [\d.]+s; the store's timeout is 2s", out.stderr), out.stderr[-2000:]
    assert "nobody-secret" not in out.stderr


def test_a_store_that_hangs_on_an_object_fails_near_its_timeout_not_twice_it(store, cifar_dir):
    # Every try of a hung request waits out curl's 3 s inactivity timeout.
    # The object's open ahead made the AWS client's seven tries (27 s with
    # a timeout of 5 s), then its reader opened it again: seven more.
    hung = sorted(cifar_dir.glob("*.tfrecord"))[2].name
    released = threading.Event()
    proxy = FaultProxy(int(store.endpoint.rsplit(":", 1)[1]), [], at=set(),
                       on_request=lambda method, path: hung in path and released.wait(300))
    try:
        out = run_sluice_python(
            f"import sluice\nlist(sluice.tfrecord('s3://train/cifar/*.tfrecord?{proxy.url_query()}', "
            "{'label': 'int64'}).batch(10))", store.env(SLUICE_OBJECT_STORE_TIMEOUT_S="5"))
        asked = [m for m, what, _ in proxy.log if hung in what]
    finally:
        released.set()
        proxy.close()
    assert out.returncode != 0 and "UnavailableError" in out.stderr and hung in out.stderr, out.stderr[-3000:]
    assert re.search(r"retried for [\d.]+s; the store's timeout is 5s", out.stderr), out.stderr[-3000:]
    assert asked.count("HEAD") <= 6, asked  # fourteen before: the open ahead's seven, the reader's seven


def test_an_epoch_cut_on_objects_resumes_to_the_uninterrupted_rest(store):
    pipe = (sluice.tfrecord("s3://train/cifar/*.tfrecord", CIFAR).shuffle(100)
            .map(ops.reshape(shape=[32, 32, 3]), ops.random_flip()).batch(32))
    whole = [{k: v.copy() for k, v in b.items()} for b in pipe.iterate(2)]
    it = pipe.iterate(2)
    for _ in range(4):
        next(it)
    assert_same_batches(pipe.iterate(state=it.state()), whole[4:])


def test_service_workers_read_the_objects_the_dispatcher_listed_once(store, cifar_dir):
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0"], env=store.env())
    address = f"127.0.0.1:{port}"
    worker, _ = start_server(["worker", "--dispatcher", address, "--host", "127.0.0.1", "--threads", "1"],
                             env=store.env())
    try:
        remote = sluice.tfrecord("s3://train/cifar/*.tfrecord", CIFAR).distribute(address, connect_timeout_s=30)
        got = sorted((int(b["label"][i]), b["image"][i].tobytes())
                     for b in remote.batch(50) for i in range(len(b["label"])))
    finally:
        for process in (worker, dispatcher):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    local = sluice.tfrecord(str(cifar_dir / "*.tfrecord"), CIFAR).batch(50)
    assert got == sorted((int(b["label"][i]), b["image"][i].tobytes()) for b in local for i in range(len(b["label"])))


def test_a_registration_held_up_by_a_store_that_does_not_answer_says_so(store):
    # The dispatcher's store (an endpoint nothing listens on) is retried for
    # longer than the consumer waits: its error must say what held it up,
    # not only gRPC's "Deadline Exceeded".
    silent = store.env(AWS_ENDPOINT_URL="http://127.0.0.1:1", SLUICE_OBJECT_STORE_TIMEOUT_S="120")
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0"], env=silent,
                                    stderr=subprocess.PIPE)
    try:
        remote = sluice.tfrecord("s3://train/cifar/*.tfrecord", CIFAR).distribute(f"127.0.0.1:{port}",
                                                                                 connect_timeout_s=2)
        with pytest.raises(sluice.DeadlineExceededError, match=r"registering the pipeline took longer than "
                                                               r"connect_timeout_s \(2s\).*object store that does "
                                                               r"not answer.*SLUICE_OBJECT_STORE_TIMEOUT_S"):
            list(remote.batch(50))
    finally:
        # Stopping gives up on the listing's retries (120 s) after its grace.
        dispatcher.send_signal(signal.SIGTERM)
        _, err = dispatcher.communicate(timeout=60)
    assert "a request (a store's listing?) is stuck 10s after the signal: exiting without it" in err

def test_google_cloud_storage_objects_read_as_the_local_files(gcs_store, cifar_dir):
    client, query = gcs_store
    for f in sorted(cifar_dir.glob("*.tfrecord")):
        with client.open_output_stream(f"gtrain/cifar/{f.name}") as out:
            out.write(f.read_bytes())
    assert_same_batches(augmented(f"gs://gtrain/cifar/*.tfrecord?{query}"), augmented(str(cifar_dir / "*.tfrecord")))
    with pytest.raises(sluice.NotFoundError, match="no object matches pattern 'gs://gtrain/cifar/nope-"):
        list(sluice.tfrecord(f"gs://gtrain/cifar/nope-*.tfrecord?{query}", CIFAR))


def test_google_credentials_that_give_no_token_are_refused_at_once_saying_what_to_set(gcs_store, tmp_path):
    _, query = gcs_store
    env = dict(os.environ, GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "missing-key.json"),
               SLUICE_OBJECT_STORE_TIMEOUT_S="600")
    query = "&".join(p for p in query.split("&") if not p.startswith("anonymous"))
    out = run_sluice_python(f"import sluice\nlist(sluice.tfrecord('gs://gtrain/cifar/*.tfrecord?{query}', "
                            "{'label': 'int64'}))", env)
    # Not retried for the store's 600 s: a permanent refusal, named.
    assert "PermissionDeniedError" in out.stderr, out.stderr[-2000:]
    assert "gs://gtrain/cifar/*.tfrecord" in out.stderr
    assert f"could not get an access token (Cannot open credentials file {tmp_path}/missing-key.json)" in out.stderr
    assert "set GOOGLE_APPLICATION_CREDENTIALS" in out.stderr


def test_a_public_bucket_is_read_anonymously_and_a_private_one_refused(store, cifar_dir, tmp_path):
    store.upload("public", sorted(cifar_dir.glob("*.tfrecord")), "cifar")
    env = store.env()
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        del env[k]
    code = ("import sluice\n"
            "for url in ('s3://public/cifar/*.tfrecord?anonymous=true', 's3://train/cifar/*.tfrecord?anonymous=true'):\n"
            "    try:\n"
            "        print(sum(len(b['label']) for b in sluice.tfrecord(url, {'label': 'int64'}).batch(64)))\n"
            "    except sluice.SluiceError as e:\n"
            "        print(type(e).__name__, e)\n")
    out = run_sluice_python(code, env)
    assert out.returncode == 0, out.stderr
    public, private = out.stdout.strip().split("\n")
    assert public == "300"
    # A PermissionError as well as a SluiceError, for code that catches the built-in.
    assert private.startswith("PermissionDeniedError") and "s3://train/cifar/*.tfrecord?anonymous=true" in private
    assert "ACCESS_DENIED" in private or "AccessDenied" in private, private


def test_blocks_fetched_ahead_are_reported_and_given_back(store, monkeypatch):
    monkeypatch.setenv("SLUICE_OBJECT_BLOCK_BYTES", str(64 << 10))
    monkeypatch.setenv("SLUICE_OBJECT_READ_AHEAD", "2")
    pipe = sluice.tfrecord("s3://train/cifar/*.tfrecord", CIFAR).batch(16)
    before = pipe.memory()["object_blocks"]
    it = iter(pipe)
    next(it)
    during = pipe.memory()
    # At most two blocks of each of the three objects, read at once.
    assert 0 < during["object_blocks"] - before <= 3 * 2 * (64 << 10)
    assert during["held"] == during["in_use"] + during["cached"] + during["rings"] + during["object_blocks"]
    list(it)
    del it
    assert pipe.memory()["object_blocks"] == before


def test_a_source_opens_its_next_object_while_it_reads_one(store, cifar_dir, tmp_path):
    from test_webdataset import shards
    files = sorted(cifar_dir.glob("*.tfrecord"))
    assert len(files) > 1
    before = sluice.object_store_stats()["opened_ahead"]
    assert_same_batches(augmented("s3://train/cifar/*.tfrecord"), augmented(str(cifar_dir / "*.tfrecord")))
    # Every object after the epoch's first was opened while the one before it was read.
    assert sluice.object_store_stats()["opened_ahead"] - before == len(files) - 1
    # WebDataset shards too, which a reader opens on its first read.
    (tmp_path / "wds").mkdir()
    local_shards = shards(tmp_path / "wds")
    upload_tree(store, tmp_path / "wds", "train", "ahead")
    fields = {"pixels": ("raw", "bytes", 60), "label": ("cls", "int64")}
    before = sluice.object_store_stats()["opened_ahead"]
    assert_same_rows(sluice.webdataset("s3://train/ahead/shard-*.tar", fields, shuffle=False),
                     sluice.webdataset(local_shards, fields, shuffle=False))
    n_shards = len(list((tmp_path / "wds").glob("shard-*.tar")))
    assert sluice.object_store_stats()["opened_ahead"] - before == n_shards - 1
    # A pipeline dropped mid-epoch leaves no object opened ahead, nor its
    # blocks (once the open under way, if any, has ended).
    pipe = augmented("s3://train/cifar/*.tfrecord")
    idle = pipe.memory()["object_blocks"]
    it = iter(pipe)
    next(it)
    del it
    deadline = time.monotonic() + 60  # a hang guard, not a timing
    while pipe.memory()["object_blocks"] != idle:
        assert time.monotonic() < deadline, "an object opened ahead kept its blocks"
        time.sleep(0.05)


def test_blocks_fetched_ahead_stay_within_a_quarter_of_the_budget(store, tmp_path):
    block = 16 << 10  # the three objects of ~300 KB are ~19 blocks each

    def peak(budget):
        """`sluice run`'s peak of objects' blocks (a fresh process: its own peak), and the rows read."""
        spec = tmp_path / f"{budget}.json"
        spec.write_text(sluice.tfrecord("s3://train/cifar/*.tfrecord", CIFAR, parallel_reads=3).batch(10)
                        .with_options(memory_budget_bytes=budget).to_json())
        env = store.env(SLUICE_OBJECT_BLOCK_BYTES=str(block), SLUICE_OBJECT_READ_AHEAD="8")
        out = subprocess.run(["sluice", "run", str(spec), "--quiet", "--json"], check=True, capture_output=True,
                             text=True, env={**os.environ, **env}).stdout
        summary = json.loads(out.strip().splitlines()[-1])
        return summary["object_block_peak_bytes"], summary["samples"]

    budget = 256 << 10
    bound = budget // 4 + 3 * block  # a quarter of the budget, and the block each of the 3 readers is on
    capped, rows = peak(budget)
    assert rows == 300  # nothing lost
    assert 0 < capped <= bound
    # One reader alone asks for its 8 blocks at once where nothing bounds them (a 256 MiB budget).
    free, rows = peak(256 << 20)
    assert rows == 300
    assert free >= 8 * block > bound


def test_index_objects_beside_the_tfrecords_give_a_length_and_record_splits(store, cifar_dir, tmp_path):
    for f in cifar_dir.glob("*.tfrecord"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    subprocess.run(["sluice", "index", *map(str, sorted(tmp_path.glob("*.tfrecord")))], check=True,
                   capture_output=True)
    store.upload("indexed", sorted(tmp_path.glob("*.tfrecord*")), "cifar")
    remote = sluice.tfrecord("s3://indexed/cifar/*.tfrecord", CIFAR, split_records=32).batch(50)
    local = sluice.tfrecord(str(tmp_path / "*.tfrecord"), CIFAR, split_records=32).batch(50)
    assert len(remote) == len(local) == 6
    assert_same_batches(remote, local)


def one_cifar_file(cifar_dir):
    return sorted(cifar_dir.glob("*.tfrecord"))[0].read_bytes()


def test_an_object_rewritten_after_the_listing_is_data_loss_naming_it(store, cifar_dir):
    data = one_cifar_file(cifar_dir)
    store.client.create_dir("changing")
    for name, rewritten in (("longer", data + data[:100]), ("same-length", data[::-1])):
        store.put(f"changing/{name}.tfrecord", data)
        pipe = sluice.tfrecord(f"s3://changing/{name}.tfrecord", CIFAR)
        pipe.schema  # the listing: the pipeline is made
        time.sleep(1.1)  # the rewrite is stamped a later second than the listing saw
        store.put(f"changing/{name}.tfrecord", rewritten)
        with pytest.raises(sluice.DataLossError, match=f"object s3://changing/{name}.tfrecord changed after it "
                                                       "was listed: the listing found"):
            list(pipe)


def _columnar_objects(store, tmp_path, bucket):
    """Two Parquet and two Arrow IPC files of 20 rows each, in `bucket`;
    returns the writers, to rewrite one."""
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    def table(i, first=0):
        return pa.table({"id": pa.array(np.arange(first + i * 20, first + i * 20 + 20), pa.int64())})
    writers = {"parquet": lambda t, p: pq.write_table(t, p, row_group_size=6),
               "arrow_ipc": lambda t, p: feather.write_feather(t, p, compression="uncompressed")}
    for kind, write in writers.items():
        (tmp_path / kind).mkdir()
        for i in range(2):
            write(table(i), tmp_path / kind / f"part-{i}")
    upload_tree(store, tmp_path, bucket, "tree")
    return writers, table


@pytest.mark.parametrize("kind", ["parquet", "arrow_ipc"])
def test_a_columnar_object_rewritten_after_the_listing_is_data_loss_naming_it(store, tmp_path, kind):
    writers, table = _columnar_objects(store, tmp_path, f"changing-{kind.replace('_', '-')}")
    url = f"s3://changing-{kind.replace('_', '-')}/tree/{kind}/part-*"
    pipe = getattr(sluice, kind)(url, shuffle=False)
    pipe.schema  # the listing: the pipeline is made (before any test sets the process's object cache,
    # which would keep the listed version and serve it)
    time.sleep(1.1)  # the rewrite is stamped a later second than the listing saw
    rewritten = tmp_path / "rewritten"
    writers[kind](table(1, first=1000), rewritten)  # the same length, other values
    store.put(f"changing-{kind.replace('_', '-')}/tree/{kind}/part-1", rewritten.read_bytes())
    with pytest.raises(sluice.DataLossError, match=f"object s3://changing-.*/tree/{kind}/part-1 changed after it "
                                                   "was listed"):
        list(pipe)


@pytest.mark.parametrize("kind", ["parquet", "arrow_ipc"])
def test_a_columnar_object_rewritten_while_a_split_is_read_hands_on_none_of_it(store, tmp_path, kind):
    # Without a cache, Arrow's readers fetch a split's footer and columns in
    # several GETs. The object is rewritten (same length, other values) as
    # the first GET after a split's open arrives (after the layout's reads):
    # the split's rows are the new version's, and none may go on.
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq
    write = {"parquet": lambda t, p: pq.write_table(t, p, row_group_size=6, compression="none",
                                                    use_dictionary=False, write_statistics=False),
             "arrow_ipc": lambda t, p: feather.write_feather(t, p, compression="uncompressed")}[kind]
    versions = []
    for first in (0, 1000):
        write(pa.table({"id": pa.array(np.arange(first, first + 20), pa.int64())}), tmp_path / f"v{first}")
        versions.append((tmp_path / f"v{first}").read_bytes())
    assert len(versions[0]) == len(versions[1])
    bucket = f"midsplit-{kind.replace('_', '-')}"
    store.client.create_dir(bucket)
    store.put(f"{bucket}/part-0", versions[0])
    seen = {"get": False, "reopened": False, "rewritten": False}

    def rewrite_as_a_split_reads(method, path):
        if path.split("?")[0] != f"/{bucket}/part-0":
            return
        if method == "HEAD" and seen["get"]:
            seen["reopened"] = True
        elif method == "GET":
            if seen["reopened"] and not seen["rewritten"]:
                seen["rewritten"] = True
                store.put(f"{bucket}/part-0", versions[1])
            seen["get"] = True
    proxy = FaultProxy(int(store.endpoint.rsplit(":", 1)[1]), [], at=set(), on_request=rewrite_as_a_split_reads)
    delivered = []
    try:
        with pytest.raises(sluice.DataLossError,
                           match=f"object s3://{bucket}/part-0\\?.* changed while being read: its ETag"):
            for b in getattr(sluice, kind)(f"s3://{bucket}/part-0?{proxy.url_query()}", shuffle=False).batch(2):
                delivered.extend(int(i) for i in b["id"])
    finally:
        proxy.close()
    assert seen["rewritten"]
    assert all(i < 1000 for i in delivered), f"rows of the new version went on: {delivered}"


def test_an_object_rewritten_while_open_is_data_loss_naming_it(store, tmp_path, monkeypatch):
    subprocess.run(["sluice", "make-data", "cifar10", "--format", "bin", "--out", str(tmp_path), "--count", "20", "--files", "1"], check=True,
                   capture_output=True)
    data = sorted(tmp_path.glob("*.bin"))[0].read_bytes()
    store.client.create_dir("rewritten")
    store.put("rewritten/batch.bin", data)
    # CIFAR-10 files are opened when the pipeline is made; read in blocks
    # of 4 KiB, so the object takes many GETs.
    monkeypatch.setenv("SLUICE_OBJECT_BLOCK_BYTES", "4096")
    pipe = sluice.cifar10("s3://rewritten/batch.bin")
    pipe.schema
    store.put("rewritten/batch.bin", bytes(len(data)))  # same length, other bytes
    with pytest.raises(sluice.DataLossError, match="object s3://rewritten/batch.bin changed while being read: "
                                                   "its ETag was .* when opened and is .* now"):
        list(pipe)


def test_no_sample_of_an_object_rewritten_mid_read_is_handed_on(store, tmp_path, monkeypatch):
    # Rewritten after the first batch, an object of 1,500 blocks of 4 KiB:
    # each block's bytes go on only once the ETag asked after its GET is
    # the one opened, so every sample before the error is the old version's.
    subprocess.run(["sluice", "make-data", "cifar10", "--format", "bin", "--out", str(tmp_path), "--count", "2000",
                    "--files", "1"], check=True, capture_output=True)
    local = sorted(tmp_path.glob("*.bin"))[0]
    data = local.read_bytes()
    store.client.create_dir("midway")
    store.put("midway/batch.bin", data)
    monkeypatch.setenv("SLUICE_OBJECT_BLOCK_BYTES", "4096")
    monkeypatch.setenv("SLUICE_OBJECT_FIRST_BLOCK_BYTES", "4096")
    original = [(b["image"].copy(), b["label"].copy()) for b in sluice.cifar10(str(local)).batch(4)]
    delivered = []
    with pytest.raises(sluice.DataLossError, match="object s3://midway/batch.bin changed while being read"):
        for b in sluice.cifar10("s3://midway/batch.bin").batch(4):
            if not delivered:
                store.put("midway/batch.bin", bytes(len(data)))  # same length, other bytes
            delivered.append((b["image"], b["label"]))
    assert len(delivered) < len(original)
    for (image, label), (want_image, want_label) in zip(delivered, original):
        assert (image == want_image).all() and (label == want_label).all(), "a sample of the new version"


@pytest.mark.parametrize("change", ["deleted", "cut shorter"])
def test_an_object_deleted_or_cut_while_read_is_data_loss_at_once(store, cifar_dir, monkeypatch, change):
    data = one_cifar_file(cifar_dir) * 20  # records end to end: a longer file
    bucket = f"going-{change.replace(' ', '-')}"
    store.client.create_dir(bucket)
    store.put(f"{bucket}/f.tfrecord", data)
    # Before any test sets the process's object cache (a copy made at the
    # open would be read instead). Many GETs, a few ahead.
    monkeypatch.setenv("SLUICE_OBJECT_BLOCK_BYTES", "4096")
    monkeypatch.setenv("SLUICE_OBJECT_STORE_TIMEOUT_S", "600")  # a retry would wait, not fail
    # A small budget keeps the pipeline from reading far ahead of the batch taken.
    batches = iter(sluice.tfrecord(f"s3://{bucket}/f.tfrecord", CIFAR).batch(10)
                   .with_options(memory_budget_bytes=1 << 20))
    next(batches)
    if change == "deleted":
        store.client.delete_file(f"{bucket}/f.tfrecord")
    else:
        store.put(f"{bucket}/f.tfrecord", data[:len(data) // 4])
    with pytest.raises(sluice.DataLossError, match=f"object s3://{bucket}/f.tfrecord changed while being read"):
        list(batches)


def settle():
    """Objects written in the last 2 s are read but not cached (a rewrite in
    the same second would look the same): a wait for that, not a race."""
    time.sleep(2.1)


def test_the_object_cache_serves_later_epochs_without_the_store(store, cifar_dir, tmp_path, monkeypatch):
    store.upload("cached", sorted(cifar_dir.glob("*.tfrecord")), "cifar")
    settle()
    proxy = TcpProxy(int(store.endpoint.rsplit(":", 1)[1]))
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
    cache = tmp_path / "cache"
    pipe = augmented("s3://cached/cifar/*.tfrecord").cache_objects(cache, 1 << 30)
    local = augmented(str(cifar_dir / "*.tfrecord"))
    files = len(list(cifar_dir.glob("*.tfrecord")))

    assert_same_batches(pipe.iterate(0), local.iterate(0))
    stats = sluice.object_store_stats()["cache"]
    assert (stats["dir"], stats["misses"], stats["hits"]) == (str(cache), files, 0)
    assert stats["bytes"] > sum(p.stat().st_size for p in cifar_dir.glob("*.tfrecord"))

    proxy.cut()  # the store is out of reach: the copies serve the epoch
    assert_same_batches(pipe.iterate(1), local.iterate(1))
    stats = sluice.object_store_stats()["cache"]
    assert (stats["misses"], stats["hits"], stats["corrupt"]) == (files, files, 0)

    proxy.mend()
    entry = sorted(cache.iterdir())[0]
    damaged = bytearray(entry.read_bytes())
    damaged[1000] ^= 0x40
    entry.write_bytes(bytes(damaged))
    assert_same_batches(pipe.iterate(2), local.iterate(2))
    stats = sluice.object_store_stats()["cache"]
    assert (stats["misses"], stats["hits"], stats["corrupt"]) == (files + 1, 2 * files - 1, 1)
    # The damaged copy's bytes went with it: the bytes held are the folder's.
    assert stats["bytes"] == sum(p.stat().st_size for p in cache.iterdir())


def test_the_object_cache_keeps_to_its_own_files_and_never_serves_a_same_second_rewrite(store, cifar_dir, tmp_path):
    # Every file in the folder counted as an entry, and the oldest went to
    # make room: a checkpoint kept there was deleted.
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "model.pt").write_bytes(bytes(3 << 20))
    (cache / "notes.part-999999-0").write_bytes(b"not ours either")
    data = sorted(cifar_dir.glob("*.tfrecord"))[0].read_bytes()
    store.put("rewrite/x.tfrecord", data)
    pipe = sluice.tfrecord("s3://rewrite/x.tfrecord", CIFAR).cache_objects(cache, 2 << 20).batch(100)
    first = [b["label"].tolist() for b in pipe]
    assert (cache / "model.pt").stat().st_size == 3 << 20 and (cache / "notes.part-999999-0").exists()
    # Rewritten with the same length, likely in the same second: a copy of
    # the first, taken as this version, was served to every later job.
    other = sorted(cifar_dir.glob("*.tfrecord"))[1]
    assert other.stat().st_size == len(data)  # CIFAR's records are all one length
    swapped = sluice.tfrecord(str(other), CIFAR).batch(100)
    store.put("rewrite/x.tfrecord", other.read_bytes())
    again = sluice.tfrecord("s3://rewrite/x.tfrecord", CIFAR).cache_objects(cache, 2 << 20).batch(100)
    assert [b["label"].tolist() for b in again] == [b["label"].tolist() for b in swapped] != first


def test_an_object_cache_of_a_bad_folder_or_bound_is_refused(store, tmp_path):
    with pytest.raises(ValueError, match="max_bytes must be > 0"):
        sluice.cifar10("s3://train/x").cache_objects(tmp_path, 0)
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(sluice.InvalidArgumentError, match=f"object cache: cannot make or write the folder "
                                                          f"{tmp_path / 'file'}"):
        sluice.tfrecord("s3://train/cifar/*.tfrecord", CIFAR).cache_objects(tmp_path / "file", 1 << 20).schema


def test_a_worker_finds_an_object_rewritten_since_the_dispatcher_listed_it(store, cifar_dir):
    data = one_cifar_file(cifar_dir)
    store.client.create_dir("relisted")
    store.put("relisted/a.tfrecord", data)
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0"], env=store.env())
    address = f"127.0.0.1:{port}"
    failure = []

    def read():
        try:
            list(sluice.tfrecord("s3://relisted/*.tfrecord", CIFAR).distribute(address, connect_timeout_s=60))
        except sluice.SluiceError as e:
            failure.append(e)
    reader = threading.Thread(target=read)
    reader.start()
    worker = None
    try:
        while not sluice.dispatcher_status(address).get("jobs"):  # registered: listed and pinned
            time.sleep(0.05)
        store.put("relisted/a.tfrecord", data + data[:64])
        worker, _ = start_server(["worker", "--dispatcher", address, "--host", "127.0.0.1", "--threads", "1"],
                                 env=store.env())
        reader.join(timeout=120)
    finally:
        for process in (worker, dispatcher):
            if process is not None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
    assert not reader.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], sluice.DataLossError), failure
    assert "object s3://relisted/a.tfrecord changed after it was listed" in str(failure[0])


def test_a_pipeline_dropped_while_the_store_is_down_stops_waiting_for_it(store, tmp_path):
    # 36 MB read in 4 KiB GETs, up to 1,000 batches ahead of a consumer that
    # took one: the reader is still at it when the store is cut.
    subprocess.run(["sluice", "make-data", "cifar10", "--out", str(tmp_path / "data"), "--count", "12000",
                    "--files", "2"], check=True, capture_output=True)
    store.upload("cancelled", sorted((tmp_path / "data").glob("*.tfrecord")), "cifar")
    proxy = TcpProxy(int(store.endpoint.rsplit(":", 1)[1]))
    # Small blocks, one at a time, and a store timeout of 10 minutes: the
    # reader goes on asking the store, and without cancellation dropping
    # the pipeline would wait that long.
    env = store.env(AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}", SLUICE_OBJECT_BLOCK_BYTES="4096",
                    SLUICE_OBJECT_READ_AHEAD="1", SLUICE_OBJECT_STORE_TIMEOUT_S="600")
    code = ("import gc, sys, time, sluice\n"
            "pipe = sluice.tfrecord('s3://cancelled/cifar/*.tfrecord', {'label': 'int64'}).batch(10).prefetch(1000)\n"
            "it = iter(pipe)\n"
            "next(it)\n"
            "print('reading', flush=True)\n"
            "sys.stdin.readline()  # the store is cut\n"
            "while sluice.object_store_stats()['retries'] == 0:\n"
            "    time.sleep(0.05)\n"
            "del it, pipe\n"
            "gc.collect()\n"
            "print('dropped', flush=True)\n")
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "reading"
        proxy.cut()
        child.stdin.write("go\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert out.strip() == "dropped"


def test_sluice_run_reads_later_epochs_from_the_object_cache_and_says_so(store, tmp_path):
    settle()
    cached = augmented("s3://train/cifar/*.tfrecord").cache_objects(tmp_path / "cache", 1 << 30)
    (tmp_path / "p.json").write_text(cached.to_json())
    run = subprocess.run(["sluice", "run", str(tmp_path / "p.json"), "--epochs", "2", "--json"], env=store.env(),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.splitlines()[-1])
    assert (report["samples"], report["object_cache_misses"], report["object_cache_hits"]) == (2 * 300, 3, 3)
    text = subprocess.run(["sluice", "run", str(tmp_path / "p.json")], env=store.env(), capture_output=True,
                          text=True, timeout=300)
    assert f"object cache {tmp_path / 'cache'}: 3 hits, 0 misses" in text.stdout, text.stdout
    assert "0 objects not cached" in text.stdout, text.stdout


@pytest.mark.parametrize("kind", ["parquet", "arrow_ipc"])
def test_columnar_objects_are_served_from_the_object_cache(store, tmp_path, kind, monkeypatch):
    bucket = f"cached-{kind.replace('_', '-')}"
    _columnar_objects(store, tmp_path, bucket)
    settle()
    proxy = TcpProxy(int(store.endpoint.rsplit(":", 1)[1]))
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
    pipe = getattr(sluice, kind)(f"s3://{bucket}/tree/{kind}/part-*", shuffle=False) \
        .cache_objects(tmp_path / "cache", 1 << 30)
    first = rows(pipe)
    assert sorted(int(r["id"]) for r in first) == list(range(40))
    proxy.cut()  # the store is out of reach: the copies serve the epoch
    assert_same_batches(rows(pipe), first)
    assert sluice.object_store_stats()["cache"]["bytes"] > 0


def test_an_endpoint_without_a_scheme_fails_at_once_saying_so(store):
    # Taken as https:// in front of a plain HTTP store: TLS fails on every
    # try, so it is not retried for the store's timeout.
    host_port = store.endpoint.split("://", 1)[1]
    out = run_sluice_python("import sluice\nlist(sluice.tfrecord('s3://train/cifar/*.tfrecord', {'label': 'int64'}))",
                            store.env(AWS_ENDPOINT_URL=host_port, SLUICE_OBJECT_STORE_TIMEOUT_S="600"))
    assert out.returncode != 0
    assert "an endpoint without a scheme is taken as https://" in out.stderr
    assert "retried for" not in out.stderr


# Each fault on every third GET and HEAD (the listing's too), blocks of
# 64 KiB so that each object takes several GETs.
def test_each_rank_gets_only_the_image_objects_it_keeps(store, tmp_path):
    import cv2
    root = tmp_path / "ranked"
    (root / "c").mkdir(parents=True)
    files = {}
    for i in range(16):
        files[i] = cv2.imencode(".jpg", np.full((6, 5, 3), 15 * i, np.uint8))[1].tobytes()
        (root / "c" / f"{i:03d}.jpg").write_bytes(files[i])
    upload_tree(store, root, "train", "ranked")
    by_bytes = {data: i for i, data in files.items()}
    seen = []
    for rank in range(2):
        proxy = FaultProxy(int(store.endpoint.rsplit(":", 1)[1]), [], at=set())
        try:
            pipe = sluice.image_folder(f"s3://train/ranked?{proxy.url_query()}").shard(2, rank).batch(2)
            kept = {by_bytes[bytes(image)] for b in pipe.with_options(seed=1).iterate(0) for image in b["image"]}
            got = {int(m) for method, what, _ in proxy.log if method == "GET"
                   for m in re.findall(r"/(\d{3})\.jpg", what)}
        finally:
            proxy.close()
        assert len(kept) == 8 and got == kept, f"rank {rank} kept {sorted(kept)}, fetched {sorted(got)}"
        seen.append(kept)
    assert seen[0] | seen[1] == set(range(16))


# A ranged GET's reply carries no checksum; asking for one costs the AWS
# client a third of the read's CPU. The user's choice stands, and the
# process's environment is as it was.
@pytest.mark.parametrize("chosen", [None, "when_supported"])
def test_gets_ask_for_checksums_only_when_the_user_does(store, cifar_dir, chosen, monkeypatch):
    import ctypes
    if chosen is None:
        monkeypatch.delenv("AWS_RESPONSE_CHECKSUM_VALIDATION", raising=False)
    else:
        monkeypatch.setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", chosen)
    name = sorted(cifar_dir.glob("*.tfrecord"))[0].name
    proxy = FaultProxy(int(store.endpoint.rsplit(":", 1)[1]), [])
    try:
        assert_same_batches(augmented(f"s3://train/cifar/{name}?{proxy.url_query()}"), augmented(str(cifar_dir / name)))
        gets = [headers for method, path, headers in proxy.headers if method == "GET" and name in path]
    finally:
        proxy.close()
    assert gets and all(("x-amz-checksum-mode" in h) == (chosen is not None) for h in gets), gets
    getenv = ctypes.CDLL(None).getenv
    getenv.restype = ctypes.c_char_p
    assert getenv(b"AWS_RESPONSE_CHECKSUM_VALIDATION") == (chosen.encode() if chosen else None)


@pytest.mark.parametrize("fault", ["503", "reset", "truncate", "stall"])
def test_a_stores_transient_faults_are_retried_and_every_sample_read_once(store, cifar_dir, fault, monkeypatch):
    proxy = FaultProxy(int(store.endpoint.rsplit(":", 1)[1]), [fault], every=3, stall_s=STALL_S)
    monkeypatch.setenv("SLUICE_OBJECT_BLOCK_BYTES", "65536")
    try:
        retried = sluice.object_store_stats()["retries"]
        assert_same_batches(augmented(f"s3://train/cifar/*.tfrecord?{proxy.url_query()}"),
                            augmented(str(cifar_dir / "*.tfrecord")))
        assert proxy.injected[fault] > 0
        faulted = "\n".join(f"{method} {what}" for method, what, f in proxy.log if f)
        assert sluice.object_store_stats()["retries"] - retried >= proxy.total(), faulted
    finally:
        proxy.close()


@pytest.mark.parametrize("named", ["one", "glob"])
def test_a_refused_session_token_fails_at_once_not_as_a_store_that_is_down(store, cifar_dir, named):
    # S3 answers an invalid or expired session token with a 400 (a HEAD's
    # without a body): it was retried for the store's whole timeout, then
    # called unavailable.
    proxy = FaultProxy(int(store.endpoint.rsplit(":", 1)[1]), ["400"], every=1)
    key = sorted(cifar_dir.glob("*.tfrecord"))[0].name if named == "one" else "*.tfrecord"
    url = f"s3://train/cifar/{key}?{proxy.url_query()}"
    try:
        with pytest.raises(sluice.PermissionDeniedError) as refused:
            next(iter(augmented(url).iterate()))
        assert f"s3://train/cifar/{key}" in str(refused.value)
        assert "HTTP status 400" in str(refused.value) and "session token, AWS_SESSION_TOKEN" in str(refused.value)
        assert proxy.injected["400"] <= 3, proxy.log  # the client's own tries at most, none of sluice's
    finally:
        proxy.close()


def test_an_expired_session_token_is_asked_again_as_the_client_renews_its_credentials(store, cifar_dir):
    proxy = FaultProxy(int(store.endpoint.rsplit(":", 1)[1]), ["400-expired"], methods=("GET",), at={1, 2})
    try:
        retried = sluice.object_store_stats()["retries"]
        assert_same_batches(augmented(f"s3://train/cifar/*.tfrecord?{proxy.url_query()}"),
                            augmented(str(cifar_dir / "*.tfrecord")))
        assert proxy.injected["400-expired"] == 2
        assert sluice.object_store_stats()["retries"] - retried >= 2
    finally:
        proxy.close()


def test_a_description_cut_in_its_headers_is_asked_again_never_read_as_an_empty_object(store, cifar_dir):
    # curl takes a HEAD's reply that ends after its first header as whole:
    # no size (0 bytes) and no date. Cut: the listing's HEAD and its first
    # retry, then the next HEAD (the object's open, or its index's).
    proxy = FaultProxy(int(store.endpoint.rsplit(":", 1)[1]), ["truncate"], methods=("HEAD",), at={1, 2, 4})
    name = sorted(cifar_dir.glob("*.tfrecord"))[0].name
    try:
        retried = sluice.object_store_stats()["retries"]
        assert_same_batches(augmented(f"s3://train/cifar/{name}?{proxy.url_query()}"), augmented(str(cifar_dir / name)))
        assert proxy.injected["truncate"] == 3
        assert proxy.log[0][:2] == proxy.log[1][:2] == proxy.log[2][:2]  # the listing's, asked again
        assert sluice.object_store_stats()["retries"] - retried >= 2
    finally:
        proxy.close()


def test_a_description_cut_after_its_date_is_looked_at_again_never_read_as_empty_or_changed(store, cifar_dir,
                                                                                             monkeypatch):
    # A reply holding its Last-Modified and no size (S3 sends the size
    # last) reads as 0 bytes written at the right time. Cut: the object's
    # listing, its open, and its ETag asked again at the end of the read
    # (5 blocks of 64 KiB).
    monkeypatch.setenv("SLUICE_OBJECT_BLOCK_BYTES", "65536")
    name = sorted(cifar_dir.glob("*.tfrecord"))[1].name
    proxy = FaultProxy(int(store.endpoint.rsplit(":", 1)[1]), ["truncate"], methods=("HEAD",), at={1, 3, 5},
                       match=f"{name} ", head_cut="date")
    try:
        assert_same_batches(augmented(f"s3://train/cifar/{name}?{proxy.url_query()}"), augmented(str(cifar_dir / name)))
        assert proxy.injected["truncate"] == 3
    finally:
        proxy.close()
