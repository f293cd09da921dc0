"""W3 peer: SPDL (Meta's thread-based data loading) with the same transforms.

Each image is demuxed and decoded by FFmpeg through spdl.io with one filter
graph that crops the random-resized-crop window (torchvision's
RandomResizedCrop.get_params: scale 0.08-1, ratio 3/4-4/3, ten tries, then
the centre fallback), scales it to 224x224 (bilinear) and flips half the
images; an spdl.pipeline stage runs that on --threads threads, batches 256
and normalizes each batch to NCHW float32 with numpy. Files are read in a
new random order every epoch, as the other contenders do.

Runs in the venv bench/peers/ensure_spdl_venv.sh makes:

    PY bench/peers/w3_spdl.py --data DIR [--threads N] [--batches 6]
        [--warmup 1] [--batch-size 256]

The last line on stdout is one JSON object with "samples_per_s".
"""

import argparse
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_batches, make_logger,  # noqa: E402
                         print_result, time_batches)

log = make_logger("w3_spdl")

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def crop_window(width, height, rng):
    """torchvision's RandomResizedCrop.get_params: (x, y, w, h)."""
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    ratio = width / height
    if ratio < 3 / 4:
        w, h = width, int(round(width / (3 / 4)))
    elif ratio > 4 / 3:
        h, w = height, int(round(height * (4 / 3)))
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "ImageFolder root (class folders of JPEGs)", 256)
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="decoding threads")
    args = p.parse_args(argv)
    check_batches(p, args)
    if args.threads < 1 or args.batch_size < 1:
        p.error("--threads and --batch-size must be >= 1")

    import numpy as np
    import spdl.io
    from spdl.pipeline import PipelineBuilder

    files = sorted(os.path.join(root, f) for root, _, names in os.walk(args.data) for f in names
                   if f.lower().endswith((".jpg", ".jpeg")))
    if len(files) < args.batch_size:
        sys.exit(f"w3_spdl: {len(files)} JPEGs under {args.data}, fewer than one batch of {args.batch_size}")
    scale = np.array([1 / (255 * s) for s in STD], np.float32).reshape(1, 3, 1, 1)
    shift = np.array([m / s for m, s in zip(MEAN, STD)], np.float32).reshape(1, 3, 1, 1)

    def paths():
        rng = random.Random()
        while True:
            order = files[:]
            rng.shuffle(order)
            yield from order

    def load(path):
        rng = random.Random()
        packets = spdl.io.demux_image(path)
        x, y, w, h = crop_window(packets.width, packets.height, rng)
        flip = ",hflip" if rng.random() < 0.5 else ""
        frames = spdl.io.decode_packets(
            packets, filter_desc=f"crop={w}:{h}:{x}:{y},scale=224:224:flags=bilinear{flip},format=rgb24")
        return spdl.io.to_numpy(spdl.io.convert_frames(frames))  # [224, 224, 3] uint8

    def collate(images):
        batch = np.stack(images).transpose(0, 3, 1, 2).astype(np.float32)
        batch *= scale
        batch -= shift
        return batch, np.zeros(len(images), np.int64)

    pipeline = (PipelineBuilder()
                .add_source(paths())
                .pipe(load, concurrency=args.threads)
                .aggregate(args.batch_size, drop_last=True)
                .pipe(collate)
                .add_sink(3)
                .build(num_threads=args.threads))
    log(f"{len(files)} images, {args.threads} threads, spdl {getattr(spdl, '__version__', '?')}")
    with pipeline.auto_stop():
        print_result(time_batches(iter(pipeline), args.warmup, args.batches, "spdl", "w3", log))


if __name__ == "__main__":
    main()
