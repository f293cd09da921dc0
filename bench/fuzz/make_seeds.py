#!/usr/bin/env python3
"""Writes the fuzz targets' first inputs into bench/fuzz/corpus/<target>/:
well-formed files of each format, made by the `sluice` command where it
makes them (TFRecord, IDX, a real dispatcher journal) and by hand where it
does not (Examples with the fuzzers' features, batch messages, images).
The fuzzers grow the corpora from these; run once, then commit.

Usage: make_seeds.py [SLUICE_BIN]   (default: $SLUICE_BIN, else `sluice`)
Needs Pillow (Debian's python3-pil) for the image seeds.
"""

import io
import json
import os
import pathlib
import signal
import struct
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(record):
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", masked(length)) + record + struct.pack("<I", masked(record))


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def field(number, value):
    """A protobuf field: bytes are length-delimited, ints varints."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def example(features):
    """A tf.train.Example of {name: bytes | [int] | [float]}."""
    entries = b""
    for name, value in features.items():
        if isinstance(value, bytes):
            feature = field(1, field(1, value))  # BytesList
        elif isinstance(value[0], float):
            feature = field(2, field(1, struct.pack(f"<{len(value)}f", *value)))  # FloatList, packed
        else:
            feature = field(3, field(1, b"".join(varint(v) for v in value)))  # Int64List, packed
        entries += field(1, field(1, name.encode()) + field(2, feature))
    return field(1, entries)


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def sluice(binary, *args, **kwargs):
    return subprocess.run([binary, *args], check=True, capture_output=True, text=True, **kwargs)


def tfrecord_seeds(binary, tmp):
    sluice(binary, "make-data", "cifar10", "--out", str(tmp / "cifar"), "--count", "3", "--files", "1")
    data = next((tmp / "cifar").glob("*.tfrecord")).read_bytes()
    write("tfrecord_reader", "three_examples", data)
    write("tfrecord_reader", "truncated", data[:-7])
    small = frame(b"first") + frame(b"") + frame(b"the third record")
    write("tfrecord_reader", "small", small)
    # The index fuzzer's own three-record file, indexed by `sluice index`.
    (tmp / "small.tfrecord").write_bytes(small)
    sluice(binary, "index", str(tmp / "small.tfrecord"))
    write("tfrecord_index", "good", (tmp / "small.tfrecord.index").read_bytes())
    record = data[12:12 + struct.unpack("<Q", data[:8])[0]]
    write("example_parser", "cifar_example", record)


def example_seeds():
    write("example_parser", "every_feature", example(
        {"image": b"\xff\xd8 not really a jpeg", "fixed": b"abcd", "label": [7], "box": [0.1, 0.2, 0.5, 0.9]}))


def idx_seeds(binary, tmp):
    sluice(binary, "make-data", "mnist", "--out", str(tmp / "mnist"), "--count", "4")
    raw = tmp / "mnist" / "MNIST" / "raw"
    write("idx_header", "images_rank3", (raw / "train-images-idx3-ubyte").read_bytes())
    write("idx_header", "labels_rank1", (raw / "train-labels-idx1-ubyte").read_bytes())


def image_seeds():
    from PIL import Image
    image = Image.new("RGB", (24, 16))
    image.putdata([(x * 10 % 256, y * 15 % 256, (x * y) % 256) for y in range(16) for x in range(24)])
    for name, kwargs in (("baseline.jpg", {"format": "JPEG", "quality": 80}),
                         ("progressive.jpg", {"format": "JPEG", "progressive": True}),
                         ("rgb.png", {"format": "PNG"})):
        out = io.BytesIO()
        image.save(out, **kwargs)
        write("image_header", name, out.getvalue())
    out = io.BytesIO()
    image.convert("L").save(out, format="PNG")
    write("image_header", "gray.png", out.getvalue())
    out = io.BytesIO()
    image.convert("CMYK").save(out, format="JPEG")
    write("image_header", "cmyk.jpg", out.getvalue())


def wire_seeds():
    # The fuzzer's schema: image uint8[4,4,3], label int64, record (ragged).
    rows = 2
    image = bytes(range(48)) * rows
    label = struct.pack("<2q", 3, 9)
    record = b"abcdefg"
    offsets = struct.pack("<3q", 0, 3, 7)
    crc = crc32c(image + label + record + offsets)
    message = (field(1, 5) + field(2, rows) +
               field(3, field(1, image) + field(3, len(image))) +
               field(3, field(1, label) + field(3, len(label))) +
               field(3, field(1, record) + field(2, offsets) + field(3, len(record))) +
               field(4, b"".join(varint(i) for i in (1 << 40, (1 << 40) + 1))) +
               varint(6 << 3 | 5) + struct.pack("<I", crc))
    write("wire_batch", "two_rows_crc_fixed", b"\x01" + message)
    write("wire_batch", "two_rows_crc_as_sent", b"\x00" + message)
    write("wire_batch", "split_end", b"\x00" + field(1, 5) + field(7, 1))


def journal_seeds(binary, tmp):
    """A real journal: a dispatcher with a work dir serves one small epoch."""
    work = tmp / "work"
    dispatcher = subprocess.Popen([binary, "dispatcher", "--host", "127.0.0.1", "--port", "0",
                                   "--work-dir", str(work)], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
    worker = None
    try:
        port = int(dispatcher.stdout.readline().split()[-1])
        worker = subprocess.Popen([binary, "worker", "--dispatcher", f"127.0.0.1:{port}", "--host",
                                   "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sluice(binary, "make-data", "mnist", "--out", str(tmp / "jmnist"), "--count", "64")
        raw = tmp / "jmnist" / "MNIST" / "raw"
        pipeline = {"nodes": [
            {"source": {"mnist": {"images": str(raw / "train-images-idx3-ubyte"),
                                  "labels": str(raw / "train-labels-idx1-ubyte")},
                        "split_records": 16}},
            {"distribute": {"dispatcher": f"127.0.0.1:{port}", "job_name": "seed"}},
            {"batch": {"size": 8}}]}
        (tmp / "journal_pipeline.json").write_text(json.dumps(pipeline))
        sluice(binary, "run", str(tmp / "journal_pipeline.json"), "--quiet")
    finally:
        for process in (worker, dispatcher):
            if process is not None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
    write("journal", "one_epoch", (work / "journal.tfrecord").read_bytes())
    write("journal", "empty", b"")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SLUICE_BIN", "sluice")
    with tempfile.TemporaryDirectory() as name:
        tmp = pathlib.Path(name)
        tfrecord_seeds(binary, tmp)
        example_seeds()
        idx_seeds(binary, tmp)
        image_seeds()
        wire_seeds()
        journal_seeds(binary, tmp)
    for folder in sorted(CORPUS.iterdir()):
        print(f"{folder.name}: {len(list(folder.iterdir()))} inputs")


if __name__ == "__main__":
    main()
