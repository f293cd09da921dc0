"""WebP decoding against OpenCV's reader (cv2.imread, IMREAD_COLOR; its own
build of libwebp): lossy, lossless and with alpha (dropped), from a file
list, an image folder and a WebDataset shard's default `image` field; a
cut, animated or foreign file is an error naming it and what it is."""

import io
import struct
import tarfile

import cv2
import numpy as np
import pytest

import sluice
from sluice import ops

RNG = np.random.RandomState(11)
H, W = 37, 53
PIXELS = RNG.randint(0, 256, (H, W, 3)).astype(np.uint8)


def opencv(path):
    return cv2.imread(str(path), cv2.IMREAD_COLOR)[..., ::-1]


def write(tmp_path, name, image, quality):
    assert cv2.imwrite(str(tmp_path / name), image, [cv2.IMWRITE_WEBP_QUALITY, quality])
    return tmp_path / name


def decoded(tmp_path, names):
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{tmp_path / name} 0\n" for name in names))
    pipe = sluice.file_list(listing, shuffle=False).map(ops.decode_image(size=[H, W])).batch(1)
    return [b["image"][0] for b in pipe]


def test_lossy_lossless_and_alpha_webp_decode_as_opencv_reads_them(tmp_path):
    write(tmp_path, "lossy.webp", cv2.GaussianBlur(PIXELS, (7, 7), 3), 80)
    write(tmp_path, "lossless.webp", PIXELS, 101)  # quality above 100: lossless
    write(tmp_path, "alpha.webp", np.dstack([PIXELS, RNG.randint(0, 256, (H, W)).astype(np.uint8)]), 101)
    names = ["lossy.webp", "lossless.webp", "alpha.webp"]
    for name, image in zip(names, decoded(tmp_path, names)):
        # Both decoders are libwebp: the same pixels, tolerance 0.
        np.testing.assert_array_equal(image, opencv(tmp_path / name), err_msg=name)
    np.testing.assert_array_equal(decoded(tmp_path, ["lossless.webp"])[0], PIXELS[..., ::-1])


def test_an_image_folder_and_a_webdataset_shard_read_webp(tmp_path):
    folder = tmp_path / "images"
    (folder / "cat").mkdir(parents=True)
    path = write(folder / "cat", "0.webp", PIXELS, 101)
    got = [b["image"][0] for b in sluice.image_folder(folder).map(ops.decode_image(size=[H, W])).batch(1)]
    assert len(got) == 1
    np.testing.assert_array_equal(got[0], PIXELS[..., ::-1])
    with tarfile.open(tmp_path / "shard-000.tar", "w") as tar:
        for name, data in (("s0.webp", path.read_bytes()), ("s0.cls", b"3")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    batches = list(sluice.webdataset(str(tmp_path / "shard-*.tar")).map(ops.decode_image(size=[H, W])).batch(1))
    np.testing.assert_array_equal(batches[0]["image"][0], PIXELS[..., ::-1])
    assert int(batches[0]["label"][0]) == 3


def error_of(tmp_path, name):
    with pytest.raises(sluice.DataLossError) as e:
        decoded(tmp_path, [name])
    return str(e.value)


def test_a_cut_webp_is_refused_naming_the_file_and_the_bytes_missing(tmp_path):
    whole = write(tmp_path, "whole.webp", PIXELS, 90).read_bytes()
    (tmp_path / "cut.webp").write_bytes(whole[: len(whole) // 2])
    message = error_of(tmp_path, "cut.webp")
    assert f"truncated WebP ({len(whole) // 2} bytes of the {len(whole)} its header declares)" in message
    assert str(tmp_path / "cut.webp") in message


def test_a_webp_without_image_data_says_so(tmp_path):
    canvas = (W - 1).to_bytes(3, "little") + (H - 1).to_bytes(3, "little")
    body = b"WEBP" + riff_chunk(b"VP8X", bytes(4) + canvas)
    (tmp_path / "empty.webp").write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    assert "corrupt WebP: no image data (no VP8 or VP8L chunk)" in error_of(tmp_path, "empty.webp")


def riff_chunk(kind, data):
    return kind + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")


def test_an_animated_webp_is_refused_as_one(tmp_path):
    frame = write(tmp_path, "frame.webp", PIXELS, 101).read_bytes()[12:]  # its VP8L chunk
    canvas = (W - 1).to_bytes(3, "little") + (H - 1).to_bytes(3, "little")
    body = (b"WEBP" + riff_chunk(b"VP8X", bytes([0x02, 0, 0, 0]) + canvas)  # 0x02: an animation
            + riff_chunk(b"ANIM", bytes(6))
            + riff_chunk(b"ANMF", bytes(6) + canvas + (100).to_bytes(3, "little") + b"\0" + frame))
    (tmp_path / "anim.webp").write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    message = error_of(tmp_path, "anim.webp")
    assert "an animated WebP: a sample must be one image" in message and "anim.webp" in message


@pytest.mark.parametrize("name,written,said", [
    ("gif.jpg", lambda p: p.write_bytes(b"GIF89a" + bytes(200)), "a GIF image, not a JPEG, PNG, WebP or binary netpbm (P5, P6) file"),
    ("bmp.jpg", lambda p: p.write_bytes(cv2.imencode(".bmp", PIXELS)[1].tobytes()),
     "a BMP image, not a JPEG, PNG, WebP or binary netpbm (P5, P6) file"),
    ("tiff.png", lambda p: p.write_bytes(cv2.imencode(".tiff", PIXELS)[1].tobytes()),
     "a TIFF image, not a JPEG, PNG, WebP or binary netpbm (P5, P6) file"),
    ("empty.jpg", lambda p: p.write_bytes(b""), "an empty file, not an image"),
])
def test_a_file_the_decoders_do_not_read_is_named_with_what_it_is(tmp_path, name, written, said):
    written(tmp_path / name)
    message = error_of(tmp_path, name)
    assert said in message and name in message, message
