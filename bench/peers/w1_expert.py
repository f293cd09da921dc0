#!/usr/bin/python3
"""W1 expert peer: what a skilled PyTorch user writes in an afternoon.

MNIST held in memory, whole batches fetched per DataLoader task (a batch
sampler handing each worker 8,192 indices), normalize and an 11x11 Gaussian
blur with sigma ~ U(0.1, 2.0) per sample (torchvision's GaussianBlur(11),
reflect padding; both variants match it within 1.2e-6), NCHW float32 out.
Two ways to blur, chosen with --variant:

  cv2   (default) cv2.GaussianBlur per sample on float32 (OpenCV's SIMD
        path);
  conv  one grouped conv2d per batch: each sample's separable kernel as
        its own group, a vertical then a horizontal pass.

Measured side by side on this project's 2-core machine, per-sample OpenCV
was the faster (114k against 70k samples/s; bench/RESULTS.md), so it is
the peer `sluice-bench w1` runs; --variant conv stays for re-measuring.
Runs under Debian's /usr/bin/python3 (python3-torch, python3-opencv).

    /usr/bin/python3 bench/peers/w1_expert.py --data DIR [--variant cv2|conv]
        [--batches 10] [--warmup 2] [--workers 2] [--batch-size 8192]

Progress goes to stderr; the last line on stdout is one JSON object, as
peer_timing.print_result writes it.
"""

import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_loader_args, epochs, make_logger,  # noqa: E402
                         print_result, time_batches)

MEAN, STD = 0.1307, 0.3081
KSIZE, SIGMA = 11, (0.1, 2.0)

log = make_logger("w1_expert")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "MNIST root (contains MNIST/raw/train-*-ubyte)", 8192,
                    workers_help="DataLoader worker processes")
    p.add_argument("--variant", choices=("cv2", "conv"), default="cv2",
                   help="how to blur: a grouped conv2d per batch, or cv2.GaussianBlur per sample")
    args = p.parse_args(argv)
    check_loader_args(p, args)
    return args


def read_idx(path, ndim):
    """An IDX file as a numpy array (magic 0x0000080N, big-endian dims)."""
    import numpy as np
    with open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack_from(">I", data)
    if magic != 0x800 | ndim:
        sys.exit(f"w1_expert: {path}: not an IDX file of {ndim} dimensions (magic {magic:#x})")
    dims = struct.unpack_from(">" + "I" * ndim, data, 4)
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def gaussian_kernels(sigmas, torch):
    """[B, KSIZE] normalized 1-D Gaussians, as torchvision computes them."""
    half = (KSIZE - 1) * 0.5
    x = torch.linspace(-half, half, KSIZE)
    k = torch.exp(-0.5 * (x[None, :] / sigmas[:, None]) ** 2)
    return k / k.sum(dim=1, keepdim=True)


class Batches:
    """Map-style dataset whose items are whole batches (a list of indices in,
    a [B,1,28,28] float32 tensor out)."""

    def __init__(self, images, labels, variant):
        self.images, self.labels, self.variant = images, labels, variant

    def __len__(self):
        return len(self.images)

    def __getitem__(self, indices):
        import numpy as np
        import torch
        idx = np.asarray(indices)
        rng = np.random.default_rng()
        sigmas = rng.uniform(*SIGMA, size=len(idx))
        x = self.images[idx].astype(np.float32) * np.float32(1 / (255 * STD)) - np.float32(MEAN / STD)
        if self.variant == "cv2":
            import cv2
            out = np.empty_like(x)
            for i in range(len(idx)):
                cv2.GaussianBlur(x[i], (KSIZE, KSIZE), sigmas[i], dst=out[i],
                                 borderType=cv2.BORDER_REFLECT_101)
            return torch.from_numpy(out).unsqueeze(1), torch.from_numpy(self.labels[idx].astype(np.int64))
        t = torch.from_numpy(x)  # [B, 28, 28]
        b = t.shape[0]
        k = gaussian_kernels(torch.from_numpy(sigmas).float(), torch)
        pad = KSIZE // 2
        t = torch.nn.functional.pad(t.unsqueeze(0), (pad, pad, pad, pad), mode="reflect")  # [1, B, 38, 38]
        t = torch.nn.functional.conv2d(t, k.view(b, 1, KSIZE, 1), groups=b)
        t = torch.nn.functional.conv2d(t, k.view(b, 1, 1, KSIZE), groups=b)
        return t.view(b, 1, 28, 28), torch.from_numpy(self.labels[idx].astype(np.int64))


def worker_init(_worker_id):
    import torch
    torch.set_num_threads(1)
    try:
        import cv2
        cv2.setNumThreads(1)
    except ImportError:
        pass


def main(argv=None):
    args = parse_args(argv)
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

    raw = os.path.join(args.data, "MNIST", "raw")
    try:
        images = read_idx(os.path.join(raw, "train-images-idx3-ubyte"), 3)
        labels = read_idx(os.path.join(raw, "train-labels-idx1-ubyte"), 1)
    except FileNotFoundError as e:
        sys.exit(f"w1_expert: {e}")
    if args.variant == "cv2":
        try:
            import cv2  # noqa: F401 (only whether it imports)
        except ImportError:
            sys.exit("w1_expert: --variant cv2 needs OpenCV for this python (apt-get install python3-opencv)")
    if len(images) < args.batch_size:
        sys.exit(f"w1_expert: {len(images)} samples, fewer than one batch of {args.batch_size}")

    dataset = Batches(images, labels, args.variant)
    sampler = BatchSampler(SequentialSampler(range(len(images))), args.batch_size, drop_last=True)
    loader = DataLoader(dataset, sampler=sampler, batch_size=None, num_workers=args.workers,
                        persistent_workers=args.workers > 0,
                        worker_init_fn=worker_init if args.workers > 0 else None)
    if args.workers == 0:
        worker_init(0)
    log(f"{len(images)} samples, batch {args.batch_size}, {args.workers} workers, blur by {args.variant}; "
        f"warmup {args.warmup}, timed {args.batches}")

    it = epochs(loader, "w1_expert", args.batch_size)
    result = time_batches(it, args.warmup, args.batches, f"expert ({args.variant})", "w1", log)
    del it, loader
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
