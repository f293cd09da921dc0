"""adjust_orientation: photos turned upright by their EXIF orientation
(JPEG's APP1, PNG's eXIf, WebP's EXIF), checked against the stored pixels
turned as PIL's ImageOps.exif_transpose turns them (numpy) and, for JPEG,
against OpenCV's imread, which applies the tag; the window of a random
crop is picked on the upright image."""

import struct
import zlib

import cv2
import numpy as np
import pytest

import sluice
from sluice import ops

RNG = np.random.RandomState(4)
H, W = 24, 40
PIXELS = cv2.GaussianBlur(RNG.randint(0, 256, (H, W, 3)).astype(np.uint8), (5, 5), 2)  # BGR, as cv2 writes

# PIL's exif_transpose: 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM,
# 5 TRANSPOSE, 6 ROTATE_270 (clockwise 90), 7 TRANSVERSE, 8 ROTATE_90.
UPRIGHT = {
    1: lambda a: a,
    2: lambda a: a[:, ::-1],
    3: lambda a: a[::-1, ::-1],
    4: lambda a: a[::-1],
    5: lambda a: a.transpose(1, 0, 2),
    6: lambda a: np.rot90(a, -1),
    7: lambda a: np.rot90(a, 2).transpose(1, 0, 2),
    8: lambda a: np.rot90(a, 1),
}


def tiff(orientation, little):
    e = "<" if little else ">"
    return ((b"II*\0" if little else b"MM\0*") + struct.pack(e + "I", 8) + struct.pack(e + "H", 1)
            + struct.pack(e + "HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(e + "I", 0))


def tagged_jpeg(orientation):
    jpeg = cv2.imencode(".jpg", PIXELS, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
    app1 = b"Exif\0\0" + tiff(orientation, little=orientation % 2 == 0)
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + jpeg[2:]


def tagged_png(orientation):
    png = cv2.imencode(".png", PIXELS)[1].tobytes()
    data = tiff(orientation, little=True)
    chunk = struct.pack(">I", len(data)) + b"eXIf" + data + struct.pack(">I", zlib.crc32(b"eXIf" + data))
    return png[:33] + chunk + png[33:]  # after IHDR


def tagged_webp(orientation):
    vp8l = cv2.imencode(".webp", PIXELS, [cv2.IMWRITE_WEBP_QUALITY, 101])[1].tobytes()[12:]
    exif = b"Exif\0\0" + tiff(orientation, little=False)
    canvas = (W - 1).to_bytes(3, "little") + (H - 1).to_bytes(3, "little")
    chunks = (b"VP8X" + struct.pack("<I", 10) + bytes([0x08, 0, 0, 0]) + canvas + vp8l  # 0x08: EXIF present
              + b"EXIF" + struct.pack("<I", len(exif)) + exif + (b"\0" if len(exif) % 2 else b""))
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WEBP" + chunks


def decoded(tmp_path, name, data, op):
    (tmp_path / name).write_bytes(data)
    (tmp_path / f"{name}.txt").write_text(f"{tmp_path / name} 0\n")
    return next(iter(sluice.file_list(tmp_path / f"{name}.txt", shuffle=False).map(op).batch(1)))["image"][0]


@pytest.mark.parametrize("orientation", range(1, 9))
def test_each_orientation_turns_upright_as_exif_transpose_and_opencv_do(tmp_path, orientation):
    for kind, data in (("jpg", tagged_jpeg(orientation)), ("png", tagged_png(orientation)),
                       ("webp", tagged_webp(orientation))):
        stored = decoded(tmp_path, f"o.{kind}", data, ops.decode_image(size=[H, W]))  # off by default
        if kind != "jpg":  # PNG and lossless WebP hold the pixels exactly
            np.testing.assert_array_equal(stored, PIXELS[..., ::-1], err_msg=kind)
        expected = UPRIGHT[orientation](stored)
        image = decoded(tmp_path, f"o.{kind}", data,
                        ops.decode_image(size=list(expected.shape[:2]), adjust_orientation=True))
        np.testing.assert_array_equal(image, expected, err_msg=f"{kind} {orientation}")
        if kind == "jpg":
            opencv = cv2.imread(str(tmp_path / "o.jpg"), cv2.IMREAD_COLOR)[..., ::-1]
            np.testing.assert_array_equal(image, opencv)


def test_a_random_crop_is_picked_on_the_upright_image(tmp_path):
    # The same draws (file 0, record 0, the same seed) on a tagged photo and
    # on its pixels stored upright: the same crop, within a level (the
    # resize runs along the stored axes).
    op = ops.decode_random_resized_crop(size=[16, 12], adjust_orientation=True)
    tagged = decoded(tmp_path, "tagged.png", tagged_png(6), op)
    upright = cv2.imencode(".png", np.ascontiguousarray(UPRIGHT[6](PIXELS)))[1].tobytes()
    plain = decoded(tmp_path, "upright.png", upright, op)
    assert np.abs(tagged.astype(int) - plain).max() <= 1
    # Fused with crop_mirror_normalize, as a training pipeline runs it.
    fused = ops.crop_mirror_normalize(mean=[0, 0, 0], std=[1, 1, 1], scale=1.0)
    (tmp_path / "list.txt").write_text(f"{tmp_path / 'tagged.png'} 0\n")
    batch = next(iter(sluice.file_list(tmp_path / "list.txt", shuffle=False).map(op, fused).batch(1)))
    np.testing.assert_array_equal(batch["image"][0], tagged.transpose(2, 0, 1).astype(np.float32))
