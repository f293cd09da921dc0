"""WebDataset shards written by Python's tarfile (the writer the webdataset
library uses), read through sluice's Python front: samples grouped by key,
shards as splits (every sample once per epoch, shuffled or not), bad
shards named."""

import io
import tarfile

import numpy as np
import pytest

import sluice
from sluice import ops


def write_shard(path, samples):
    """samples: (key, {extension: bytes}) in order."""
    with tarfile.open(path, "w") as tar:
        for key, members in samples:
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def shards(tmp_path, n_shards=4, per_shard=25):
    for s in range(n_shards):
        samples = []
        for i in range(s * per_shard, (s + 1) * per_shard):
            pixels = np.full((4, 5, 3), i % 256, np.uint8).tobytes()
            samples.append((f"{s:03d}/{i:06d}", {"raw": pixels, "cls": str(i % 10).encode(), "txt": b"caption"}))
        write_shard(tmp_path / f"shard-{s:03d}.tar", samples)
    return str(tmp_path / "shard-*.tar")


def test_samples_come_by_key_and_each_once_per_shuffled_epoch(tmp_path):
    pattern = shards(tmp_path)
    pipe = (sluice.webdataset(pattern, {"pixels": ("raw", "bytes", 60), "label": ("cls", "int64")}, shuffle=True)
            .map(ops.reshape(field="pixels", shape=[4, 5, 3]))
            .batch(10))
    orders = []
    for _ in range(2):
        seen = []
        for b in pipe:
            assert b["pixels"].shape[1:] == (4, 5, 3)
            ids = b["pixels"][:, 0, 0, 0].astype(np.int64)
            assert (b["label"] == ids % 10).all()
            seen += ids.tolist()
        assert sorted(seen) == list(range(100))
        orders.append(seen)
    # Shards shuffle as wholes: each run of 25 is one shard, in order.
    for seen in orders:
        for start in range(0, 100, 25):
            run = seen[start:start + 25]
            assert run == list(range(run[0], run[0] + 25))


@pytest.mark.parametrize("mode, suffix", [("w:gz", ".tar.gz"), ("w:xz", ".tar.xz")])
def test_compressed_shards_read_as_plain_ones(tmp_path, mode, suffix):
    shards(tmp_path)
    for plain in sorted(tmp_path.glob("shard-*.tar")):
        with tarfile.open(plain) as src, tarfile.open(str(plain).replace(".tar", suffix), mode) as dst:
            for member in src.getmembers():
                dst.addfile(member, src.extractfile(member))

    def rows(pattern):
        return [(int(r["label"]), bytes(r["pixels"])) for r in
                sluice.webdataset(pattern, {"pixels": ("raw", "bytes", 60), "label": ("cls", "int64")},
                                  shuffle=False)]
    assert rows(str(tmp_path / f"shard-*{suffix}")) == rows(str(tmp_path / "shard-*.tar"))


def test_a_missing_field_or_a_truncated_shard_is_named_or_skipped(tmp_path):
    write_shard(tmp_path / "a.tar", [("k0", {"jpg": b"x", "cls": b"1"}), ("k1", {"jpg": b"y"}),
                                     ("k2", {"jpg": b"z", "cls": b"2"})])
    with pytest.raises(sluice.DataLossError, match=r"sample 'k1'.*field 'label'.*a\.tar"):
        list(sluice.webdataset(str(tmp_path / "a.tar")))
    fields = {"image": ("jpg", "bytes", 1), "label": ("cls", "int64")}
    pipe = sluice.webdataset(str(tmp_path / "a.tar"), fields, on_corrupt="skip").batch(3)
    it = pipe.engine.iterate(0)
    batch = it.next_numpy()
    assert batch["label"].tolist() == [1, 2] and it.skipped == 1

    data = (tmp_path / "a.tar").read_bytes()
    (tmp_path / "cut.tar").write_bytes(data[:1100])  # inside the second member's header block
    with pytest.raises(sluice.DataLossError, match=r"truncated or damaged.*cut\.tar"):
        list(sluice.webdataset(str(tmp_path / "cut.tar")))


def test_a_bad_field_declaration_is_an_invalid_argument(tmp_path):
    shards(tmp_path, 1, 2)
    with pytest.raises(sluice.InvalidArgumentError, match="dtype must be"):
        sluice.webdataset(str(tmp_path / "*.tar"), {"x": ("raw", "float64")}).schema
