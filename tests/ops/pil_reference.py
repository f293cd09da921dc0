#!/usr/bin/python3
"""The independent reference for sluice's image ops: PIL (Debian's
python3-pil, over the system's libjpeg-turbo and libpng), doing what
torchvision does with PIL images.

    pil_reference.py IN OUT decode
    pil_reference.py IN OUT resize W H
    pil_reference.py IN OUT resize_center_crop RESIZE CROP
    pil_reference.py IN OUT crop_resize LEFT TOP W H OUT_W OUT_H

Writes the RGB uint8 result's bytes (row-major HWC) to OUT.
"""

import sys

from PIL import Image


def main(argv):
    src, out, mode = argv[1], argv[2], argv[3]
    img = Image.open(src).convert("RGB")
    if mode == "resize":
        img = img.resize((int(argv[4]), int(argv[5])), Image.BILINEAR)
    elif mode == "resize_center_crop":
        size, crop = int(argv[4]), int(argv[5])
        w, h = img.size  # torchvision's Resize(size): the shorter side to size, the longer truncated
        if w <= h:
            img = img.resize((size, int(size * h / w)), Image.BILINEAR)
        else:
            img = img.resize((int(size * w / h), size), Image.BILINEAR)
        w, h = img.size  # CenterCrop(crop)
        top, left = int(round((h - crop) / 2.0)), int(round((w - crop) / 2.0))
        img = img.crop((left, top, left + crop, top + crop))
    elif mode == "crop_resize":  # torchvision's resized_crop (RandomResizedCrop's): crop, then resize
        left, top, w, h, out_w, out_h = (int(a) for a in argv[4:10])
        img = img.crop((left, top, left + w, top + h)).resize((out_w, out_h), Image.BILINEAR)
    elif mode != "decode":
        sys.exit(f"unknown mode {mode}")
    with open(out, "wb") as f:
        f.write(img.tobytes())


if __name__ == "__main__":
    main(sys.argv)
