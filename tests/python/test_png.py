"""PNG decoding against OpenCV's reader (cv2.imread, IMREAD_COLOR), which
expands palettes and gray, drops alpha and cuts 16-bit samples to their
high byte: every PNG layout, and an image decoded after another."""

import struct
import zlib

import cv2
import numpy as np
import pytest

import sluice
from sluice import ops

RNG = np.random.RandomState(7)
H, W = 9, 13


def decoded(tmp_path, names):
    """Each file's image as decode_image gives it, in the listed order."""
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{tmp_path / name} 0\n" for name in names))
    pipe = sluice.file_list(listing, shuffle=False).map(ops.decode_image(size=[H, W])).batch(1)
    return [b["image"][0] for b in pipe]


def opencv(path):
    return cv2.imread(str(path), cv2.IMREAD_COLOR)[..., ::-1]


def palette_png(indices, palette, alpha):
    """A palette PNG with a tRNS chunk, written by hand (OpenCV writes none)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\0" + bytes(row) for row in indices.astype(np.uint8))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 3, 0, 0, 0))
            + chunk(b"PLTE", palette.astype(np.uint8).tobytes()) + chunk(b"tRNS", alpha.astype(np.uint8).tobytes())
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


LAYOUTS = {
    "rgb8": lambda: RNG.randint(0, 256, (H, W, 3)).astype(np.uint8),
    "gray8": lambda: RNG.randint(0, 256, (H, W)).astype(np.uint8),
    "rgba8": lambda: RNG.randint(0, 256, (H, W, 4)).astype(np.uint8),
    "gray16": lambda: RNG.randint(0, 65536, (H, W)).astype(np.uint16),
    "rgb16": lambda: RNG.randint(0, 65536, (H, W, 3)).astype(np.uint16),
    "rgba16": lambda: RNG.randint(0, 65536, (H, W, 4)).astype(np.uint16),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_png_layout_decodes_as_opencv_reads_it(tmp_path, layout):
    cv2.imwrite(str(tmp_path / "x.png"), LAYOUTS[layout]())
    (image,) = decoded(tmp_path, ["x.png"])
    np.testing.assert_array_equal(image, opencv(tmp_path / "x.png"))


def test_sixteen_bit_samples_keep_their_high_byte_without_gamma(tmp_path):
    cv2.imwrite(str(tmp_path / "g.png"), np.full((H, W), 30000, np.uint16))
    (image,) = decoded(tmp_path, ["g.png"])
    assert (image == 30000 >> 8).all()  # 117; read as linear light and made sRGB it was 179


def test_a_palette_with_transparency_gives_its_colours_without_alpha(tmp_path):
    palette = RNG.randint(0, 256, (5, 3))
    indices = RNG.randint(0, 5, (H, W))
    (tmp_path / "p.png").write_bytes(palette_png(indices, palette, np.array([0, 64, 128, 255, 0])))
    (image,) = decoded(tmp_path, ["p.png"])
    np.testing.assert_array_equal(image, palette[indices])


def test_a_transparent_image_is_the_same_whatever_was_decoded_before_it(tmp_path):
    cv2.imwrite(str(tmp_path / "white.png"), np.full((H, W, 3), 255, np.uint8))
    cv2.imwrite(str(tmp_path / "black.png"), np.zeros((H, W, 3), np.uint8))
    half = np.zeros((H, W, 4), np.uint8)
    half[..., 3] = 128  # black, half transparent: it was blended onto the previous image's pixels
    cv2.imwrite(str(tmp_path / "half.png"), half)
    images = decoded(tmp_path, ["white.png", "half.png", "black.png", "half.png"])
    assert (images[1] == 0).all() and (images[3] == 0).all()
