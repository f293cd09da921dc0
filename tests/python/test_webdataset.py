"""WebDataset shards written by Python's tarfile (the writer the webdataset
library uses), read through sluice's Python front: samples grouped by key,
shards as splits (every sample once per epoch, shuffled or not), bad
shards named."""

import gzip
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


def _declare_size(tar_bytes, member, size_field):
    """The tar with member `member`'s 12-byte size field replaced (its
    header's checksum made right again)."""
    data = bytearray(tar_bytes)
    header = 512 * (2 * member)  # every test member here fits one data block
    data[header + 124:header + 136] = size_field
    data[header + 148:header + 156] = b" " * 8
    data[header + 148:header + 156] = b"%06o\0 " % sum(data[header:header + 512])
    return bytes(data)


_READ_UNDER_4_GB = """
import resource, sys
import sluice
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
try:
    print(list(sluice.webdataset(sys.argv[1], {"image": "jpg", "label": ("cls", "int64")})))
except sluice.DataLossError as e:
    print("DataLossError:", e)
"""


@pytest.mark.parametrize("declared, size_field", [
    ((8 << 30) - 1, b"77777777777\0"),                    # 8 GiB, octal
    (1 << 62, b"\x80" + (1 << 62).to_bytes(11, "big")),     # GNU's base-256
])
def test_a_member_whose_header_declares_a_huge_size_is_damage_not_an_allocation(tmp_path, declared, size_field):
    import subprocess
    import sys
    write_shard(tmp_path / "a.tar", [("k0", {"jpg": b"\xff\xd8" + b"x" * 100, "cls": b"1"}),
                                     ("k1", {"jpg": b"y", "cls": b"2"})])
    (tmp_path / "a.tar").write_bytes(_declare_size((tmp_path / "a.tar").read_bytes(), 0, size_field))
    # Under a 4 GB address space: the header's size was allocated first
    # (bad_alloc or length_error aborted the process).
    child = subprocess.run([sys.executable, "-c", _READ_UNDER_4_GB, str(tmp_path / "a.tar")],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout.startswith("DataLossError: node 'source_0': the tar is truncated or damaged in member "
                                   f"k0.jpg (its header, at byte 0 of the tar, declares {declared} bytes, and the "
                                   "shard ends or is damaged within them)")
    assert "a.tar" in child.stdout


def test_an_integer_member_that_is_not_one_is_quoted_escaped_with_the_shard_named(tmp_path):
    write_shard(tmp_path / "a.tar", [("k0", {"jpg": b"x", "cls": b"19\0\0\xff"})])
    with pytest.raises(sluice.DataLossError) as raised:
        list(sluice.webdataset(str(tmp_path / "a.tar"), {"image": "jpg", "label": ("cls", "int64")}))
    assert "member k0.cls of field 'label' is not an integer: \"19\\x00\\x00\\xff\" in WebDataset shard " \
        in str(raised.value)
    assert str(raised.value).endswith("a.tar")


def test_a_bad_field_declaration_is_an_invalid_argument(tmp_path):
    shards(tmp_path, 1, 2)
    with pytest.raises(sluice.InvalidArgumentError, match="dtype must be"):
        sluice.webdataset(str(tmp_path / "*.tar"), {"x": ("raw", "float64")}).schema


def gzip_shard_bytes(tmp_path, level=6, pad_to=0):
    """A shard of 12 samples of 100 KB (1.2 MB, past one read) gzipped;
    `pad_to` pads the tar with zeros (still a valid tar) to that length."""
    rng = np.random.default_rng(0)
    write_shard(tmp_path / "plain.tar",
                [(f"{i:03d}", {"raw": rng.integers(0, 256, 100_000, np.uint8).tobytes(), "cls": str(i).encode()})
                 for i in range(12)])
    tar = (tmp_path / "plain.tar").read_bytes()
    return gzip.compress(tar.ljust(pad_to, b"\0"), level), tar


def read_gz(path, on_corrupt="error"):
    it = iter(sluice.webdataset(str(path), {"raw": "raw", "label": ("cls", "int64")}, shuffle=False,
                                on_corrupt=on_corrupt))
    return [(int(r["label"]), bytes(r["raw"])) for r in it], it


def test_a_gzip_shard_whose_bytes_differ_from_its_crc_is_named_not_read_as_good(tmp_path):
    # A stored (level 0) block holds the bytes as they are: a flipped byte
    # breaks no deflate code, only the CRC at the member's end tells.
    data, _ = gzip_shard_bytes(tmp_path, level=0)
    damaged = bytearray(data)
    damaged[600_000] ^= 0x55
    (tmp_path / "damaged.tar.gz").write_bytes(bytes(damaged))
    with pytest.raises(sluice.DataLossError, match="CRC") as err:
        read_gz(tmp_path / "damaged.tar.gz")
    assert "damaged.tar.gz" in str(err.value)
    rows, it = read_gz(tmp_path / "damaged.tar.gz", on_corrupt="skip")
    assert it.skipped == 1 and "CRC" in it.skip_summary and len(rows) < 12


def test_a_gzip_crc_after_the_tars_end_is_checked(tmp_path):
    # The tar padded to 2 MiB exactly: its end marker comes out of the
    # decompressor before the gzip trailer is read.
    data, _ = gzip_shard_bytes(tmp_path, pad_to=2 << 20)
    damaged = bytearray(data)
    damaged[-6] ^= 1  # in the CRC
    (tmp_path / "crc.tar.gz").write_bytes(bytes(damaged))
    with pytest.raises(sluice.DataLossError, match="CRC"):
        read_gz(tmp_path / "crc.tar.gz")


def test_gzip_shards_of_several_members_or_trailing_zeros_read_whole_and_a_cut_one_is_named(tmp_path):
    data, tar = gzip_shard_bytes(tmp_path)
    half = len(tar) // 2 // 512 * 512
    (tmp_path / "members.tar.gz").write_bytes(gzip.compress(tar[:half]) + gzip.compress(tar[half:]))
    (tmp_path / "zeros.tar.gz").write_bytes(data + bytes(1000))
    (tmp_path / "cut.tar.gz").write_bytes(data[:len(data) * 2 // 3])
    (tmp_path / "junk.tar.gz").write_bytes(data + b"junk")
    expected, _ = read_gz(tmp_path / "plain.tar")
    assert len(expected) == 12
    assert read_gz(tmp_path / "members.tar.gz")[0] == expected
    assert read_gz(tmp_path / "zeros.tar.gz")[0] == expected
    for name, problem in (("cut.tar.gz", "ends within a gzip member"), ("junk.tar.gz", "start no member")):
        with pytest.raises(sluice.DataLossError, match=problem) as err:
            read_gz(tmp_path / name)
        assert name in str(err.value)
    # Under "skip" the samples inflated before the cut are handed on; the
    # read that found it held them back, and the whole shard was lost.
    rows, it = read_gz(tmp_path / "cut.tar.gz", on_corrupt="skip")
    assert 1 <= len(rows) < 12 and rows == expected[:len(rows)], len(rows)
    assert it.skipped == 1 and "the samples before were handed on" in it.skip_summary
    # Bytes after a whole gzip member: every sample comes (the read that
    # found them lost its samples, a small shard all of them), and they count.
    write_shard(tmp_path / "small.tar", [(f"{i:03d}", {"raw": bytes([i]) * 700, "cls": str(i).encode()})
                                         for i in range(6)])
    for tar in (tmp_path / "plain.tar", tmp_path / "small.tar"):
        whole, _ = read_gz(tar)
        (tmp_path / "junk.tar.gz").write_bytes(gzip.compress(tar.read_bytes()) + b"junkjunk")
        rows, it = read_gz(tmp_path / "junk.tar.gz", on_corrupt="skip")
        assert rows == whole and it.skipped == 1
        assert "start no member, after its tar's end: its samples were all handed on" in it.skip_summary


def test_a_field_of_several_extensions_names_the_member_that_failed(tmp_path):
    write_shard(tmp_path / "a.tar", [("a", {"jpg": b"1", "txt": b"7"}), ("b", {"jpg": b"2", "TXT": b"x9"})])
    with pytest.raises(sluice.DataLossError, match=r"member b\.TXT of field 'label' is not an integer"):
        list(sluice.webdataset(str(tmp_path / "a.tar"), {"image": "jpg", "label": ("cls;txt", "int64")}))
    write_shard(tmp_path / "b.tar", [("a", {"jpg": b"1", "bin": b"1234"}), ("b", {"jpg": b"2", "raw": b"123"})])
    with pytest.raises(sluice.DataLossError, match=r"member b\.raw of field 'raw' has 3 bytes, not the declared 4"):
        list(sluice.webdataset(str(tmp_path / "b.tar"), {"image": "jpg", "raw": ("bin;raw", "bytes", 4)}))


def test_a_damaged_header_says_the_rest_of_the_shard_is_lost(tmp_path):
    write_shard(tmp_path / "a.tar", [(f"s{i}", {"jpg": b"x" * 100, "cls": str(i).encode()}) for i in range(6)])
    data = bytearray((tmp_path / "a.tar").read_bytes())
    data[2048 * 3 + 20] ^= 0x55  # s3.jpg's header (a sample: two members of a header and a block)
    (tmp_path / "a.tar").write_bytes(bytes(data))
    it = iter(sluice.webdataset(str(tmp_path / "a.tar"), {"label": ("cls", "int64")}, shuffle=False,
                                on_corrupt="skip"))
    assert [int(r["label"]) for r in it] == [0, 1, 2]
    assert "damaged after member s2.cls" in it.skip_summary
    assert "the rest of the shard is lost, its samples not counted" in it.skip_summary


def test_key_and_url_fields_give_each_samples_key_and_shard_as_the_webdataset_library_does(tmp_path):
    pattern = shards(tmp_path, 2, 3)
    rows = [(bytes(r["key"]).decode(), bytes(r["url"]).decode(), int(r["label"])) for r in
            sluice.webdataset(pattern, {"key": "__key__", "url": "__url__", "label": ("cls", "int64")},
                              shuffle=False)]
    assert rows == [(f"{i // 3:03d}/{i:06d}", str(tmp_path / f"shard-{i // 3:03d}.tar"), i % 10) for i in range(6)]
    with pytest.raises(sluice.InvalidArgumentError, match="only extension"):
        sluice.webdataset(pattern, {"key": ("__key__", "int64")}).schema


def test_a_list_of_extensions_with_a_type_in_it_is_refused_not_read_as_extensions(tmp_path):
    pattern = shards(tmp_path, 1, 2)
    with pytest.raises(ValueError, match=r"\('cls', 'int64'\)"):
        sluice.webdataset(pattern, {"label": ["cls", "int64"]})
    assert [int(r["label"]) for r in sluice.webdataset(pattern, {"label": ("cls", "int64")}, shuffle=False)] == [0, 1]
