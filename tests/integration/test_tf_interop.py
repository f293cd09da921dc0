"""TensorFlow interop: sluice reads TF's TFRecords and TF reads sluice's.

Run with the peer venv's python (it has tensorflow-cpu and pytest):

    PY=$(bench/peers/ensure_peer_venv.sh)
    SLUICE_BIN=build/sluice "$PY" -m pytest -q tests/integration/test_tf_interop.py

Skipped as a whole when tensorflow cannot be imported or SLUICE_BIN is unset.
GZIP- and ZLIB-compressed TFRecords (TFRecordWriter with options="GZIP"
or "ZLIB") are read too.
"""

import base64
import glob
import json
import os
import re
import struct
import subprocess

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

try:
    import tensorflow as tf
except Exception:  # ImportError, or a broken install
    pytest.skip("tensorflow-cpu not installed: TF interop tests skipped",
                allow_module_level=True)

import numpy as np  # tensorflow depends on numpy


@pytest.fixture(scope="module")
def sluice_bin():
    path = os.environ.get("SLUICE_BIN")
    if not path:
        pytest.skip("SLUICE_BIN is not set: point it at the sluice binary "
                    "to run the TF interop tests")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.skip(f"SLUICE_BIN={path} is not an executable file")
    return path


def run_sluice(binary, *args, timeout=120):
    r = subprocess.run([binary, *args], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, (
        f"sluice {' '.join(args)} exited {r.returncode}\n"
        f"stdout:\n{r.stdout[-2000:]}\nstderr:\n{r.stderr[-2000:]}")
    return r.stdout


def get(obj, camel, snake):
    """Field of a protobuf-JSON object under its JSON name or its proto name
    (both are valid protobuf JSON)."""
    if camel in obj:
        return obj[camel]
    return obj[snake]


def feature_bytes(example, name):
    feat = get(example, "features", "features")["feature"][name]
    values = get(feat, "bytesList", "bytes_list")["value"]
    return [base64.b64decode(v) for v in values]


def feature_int64(example, name):
    feat = get(example, "features", "features")["feature"][name]
    # int64 is a JSON string in protobuf's mapping; accept numbers as well
    return [int(v) for v in get(feat, "int64List", "int64_list")["value"]]


def record_offsets(path):
    """Byte offset of each record in a TFRecord file, from its framing."""
    offsets = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        offsets.append(pos)
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + 4 + length + 4
    assert pos == len(data)
    return offsets


def make_example(image, label):
    return tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    }))


def test_sluice_inspect_reads_tf_written_records(sluice_bin, tmp_path):
    rng = np.random.default_rng(1234)
    n = 20
    images = [rng.integers(0, 256, 3072, dtype=np.uint8).tobytes()
              for _ in range(n)]
    # labels include 0, a large value and a negative one (int64 varints)
    labels = [int(v) for v in rng.integers(0, 10, n)]
    labels[1], labels[2] = 2**40 + 7, -3
    path = tmp_path / "tf-written.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for img, lab in zip(images, labels):
            w.write(make_example(img, lab).SerializeToString())

    out = run_sluice(sluice_bin, "inspect", str(path), "--json", "--limit", "0")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == n, f"expected {n} JSON lines, got {len(lines)}"
    offsets = record_offsets(path)
    for i, line in enumerate(lines):
        rec = json.loads(line)
        assert rec["index"] == i
        assert rec["offset"] == offsets[i]
        ex = rec["example"]
        assert feature_int64(ex, "label") == [labels[i]], f"record {i}"
        assert feature_bytes(ex, "image") == [images[i]], f"record {i}"


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
def test_sluice_reads_tf_compressed_records(sluice_bin, tmp_path, compression):
    path = tmp_path / "tf-written.tfrecord.z"
    examples = [make_example(bytes([i]) * (i + 1), i).SerializeToString() for i in range(50)]
    with tf.io.TFRecordWriter(str(path), options=compression) as w:
        for ex in examples:
            w.write(ex)
    out = run_sluice(sluice_bin, "inspect", str(path), "--json", "--limit", "0")
    lines = [json.loads(ln) for ln in out.splitlines() if ln.strip()]
    assert [feature_int64(rec["example"], "label") for rec in lines] == [[i] for i in range(50)]
    assert [feature_bytes(rec["example"], "image") for rec in lines] == [[bytes([i]) * (i + 1)] for i in range(50)]
    read_by_tf = [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type=compression)]
    assert read_by_tf == examples


def test_tf_reads_sluice_make_data(sluice_bin, tmp_path):
    out_dir = tmp_path / "cifar"
    run_sluice(sluice_bin, "make-data", "cifar10", "--out", str(out_dir),
               "--count", "300", "--files", "2")
    files = sorted(glob.glob(str(out_dir / "*.tfrecord")))
    names = [os.path.basename(f) for f in files]
    assert len(files) == 2, names
    for name in names:
        assert re.fullmatch(r"train-\d{5}-of-00002\.tfrecord", name), name

    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    count = 0
    # TFRecordDataset checks both masked CRC32Cs of every record.
    for record in tf.data.TFRecordDataset(files):
        ex = tf.io.parse_single_example(record, spec)
        assert len(ex["image"].numpy()) == 3072
        assert 0 <= int(ex["label"].numpy()) <= 9
        count += 1
    assert count == 300
