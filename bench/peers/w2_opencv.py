#!/usr/bin/python3
"""W2 expert peer: an all-OpenCV torch DataLoader, as a skilled user writes it.

Per sample, on uint8 HWC: cv2.dilate (3x3), the 11x11 Gaussian blur
(sigma 0.8) as cv2.sepFilter2D with cv2.getGaussianKernel's taps, then the
flip, rotation (up to +-36 degrees) and zoom (0.9-1.1) composed into one
matrix and applied by one cv2.warpAffine (bilinear, reflected borders).
sepFilter2D, not GaussianBlur: OpenCV 4.6's GaussianBlur takes a bit-exact
fixed-point path on uint8 that ran at 24.5 us a sample here, against 6.7
us for the same taps through sepFilter2D (an expert profiles). Each worker fills whole uint8 batches and
turns them into NCHW float32 / 255 once per batch; the DataLoader hands
those batches on as they are (batch_size=None). Records are parsed with
Google protobuf, as in w2_torch.py. Runs under Debian's /usr/bin/python3
(python3-torch, python3-opencv, python3-protobuf; `protoc` on PATH).

    /usr/bin/python3 bench/peers/w2_opencv.py --data DIR [--batches 20]
        [--warmup 2] [--workers 2] [--batch-size 1024]

Progress goes to stderr; the last line on stdout is one JSON object, as
peer_timing.print_result writes it.
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_loader_args, epochs, make_logger,  # noqa: E402
                         print_result, time_batches)
from w2_torch import cifar_examples, load_example_pb2, tfrecord_files, worker_share  # noqa: E402

log = make_logger("w2_opencv")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "directory of *.tfrecord files", 1024, workers_help="DataLoader worker processes")
    p.add_argument("--blur", choices=("sepfilter", "gaussian"), default="sepfilter",
                   help="the blur: cv2.sepFilter2D with the Gaussian's taps (the expert's, faster), or "
                        "cv2.GaussianBlur (what bench/python_ops_w2.py's user function calls)")
    args = p.parse_args(argv)
    check_loader_args(p, args)
    return args


def augment_matrix(rng, m):
    """Writes into the 2x3 array `m` one affine for a random horizontal
    flip, rotation and zoom about the image's center (what Keras'
    RandomFlip, RandomRotation(0.1) and RandomZoom(0.1) do one after
    another): x' = R S F (x - c) + c."""
    c = 15.5  # the center of 32 pixels
    angle = math.radians(rng.uniform(-36.0, 36.0))
    scale = rng.uniform(0.9, 1.1)
    cos, sin = math.cos(angle) * scale, math.sin(angle) * scale
    flip = -1.0 if rng.random() < 0.5 else 1.0
    m[0, 0], m[0, 1] = cos * flip, -sin
    m[1, 0], m[1, 1] = sin * flip, cos
    m[0, 2] = c - (m[0, 0] + m[0, 1]) * c
    m[1, 2] = c - (m[1, 0] + m[1, 1]) * c
    return m


class ExpertTransform:
    """The expert's per-sample work: dilation, blur and one warp for the
    flip, rotation and zoom, written into a uint8 HWC batch."""

    def __init__(self, blur="sepfilter"):
        import cv2
        import numpy as np
        self.cv2, self.blur = cv2, blur
        self.kernel = np.ones((3, 3), np.uint8)
        self.taps = cv2.getGaussianKernel(11, 0.8)
        self.rng = np.random.default_rng()
        self.matrix = np.empty((2, 3))

    def __call__(self, raw, out):
        import numpy as np
        cv2 = self.cv2
        img = np.frombuffer(raw, np.uint8).reshape(32, 32, 3)
        img = cv2.dilate(img, self.kernel)
        if self.blur == "gaussian":
            img = cv2.GaussianBlur(img, (11, 11), 0.8)
        else:
            img = cv2.sepFilter2D(img, -1, self.taps, self.taps)
        cv2.warpAffine(img, augment_matrix(self.rng, self.matrix), (32, 32), dst=out, flags=cv2.INTER_LINEAR,
                       borderMode=cv2.BORDER_REFLECT)


def to_nchw_float(images):
    """A uint8 NHWC batch as NCHW float32 / 255, once per batch."""
    import torch
    return torch.from_numpy(images).permute(0, 3, 1, 2).float().mul_(1 / 255.0).contiguous()


def build_dataset(files, example_pb2, batch_size, blur="sepfilter"):
    import numpy as np
    import torch
    from torch.utils.data import IterableDataset

    class Batches(IterableDataset):
        def __iter__(self):
            transform = ExpertTransform(blur)
            images = np.empty((batch_size, 32, 32, 3), np.uint8)
            labels = np.empty(batch_size, np.int64)
            n = 0
            for raw, label in cifar_examples(example_pb2, *worker_share(files)):
                transform(raw, images[n])
                labels[n] = label
                n += 1
                if n == batch_size:
                    yield to_nchw_float(images), torch.from_numpy(labels.copy())
                    n = 0
            # the partial last batch is dropped, as drop_last=True would

    return Batches()


def worker_init(_worker_id):
    import cv2
    import torch
    torch.set_num_threads(1)
    cv2.setNumThreads(1)


def main(argv=None):
    args = parse_args(argv)
    files = tfrecord_files(args.data, "w2_opencv")
    try:
        import cv2  # noqa: F401
    except ImportError:
        sys.exit("w2_opencv: OpenCV is not installed for this python (apt-get install python3-opencv)")
    example_pb2 = load_example_pb2()
    from torch.utils.data import DataLoader

    loader = DataLoader(build_dataset(files, example_pb2, args.batch_size, args.blur), batch_size=None,
                        num_workers=args.workers, persistent_workers=args.workers > 0,
                        worker_init_fn=worker_init if args.workers > 0 else None)
    if args.workers == 0:
        worker_init(0)
    log(f"{len(files)} files, batch {args.batch_size}, {args.workers} workers; "
        f"warmup {args.warmup}, timed {args.batches}")

    it = epochs(loader, "w2_opencv", args.batch_size)
    result = time_batches(it, args.warmup, args.batches, "expert (OpenCV)", "w2", log)
    del it, loader
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
