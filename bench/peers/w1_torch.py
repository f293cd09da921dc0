#!/usr/bin/python3
"""W1 peer: MNIST + normalize + GaussianBlur(11) in a torch DataLoader.

Runs under Debian's /usr/bin/python3 (python3-torch, python3-torchvision).

    /usr/bin/python3 bench/peers/w1_torch.py --data DIR [--batches 20]
        [--warmup 2] [--workers 2] [--batch-size 8192]

DIR is the torchvision MNIST root: it must contain
MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte (nothing is downloaded).

Progress goes to stderr; the last line on stdout is one JSON object:
    {"peer": "torch", "workload": "w1", "samples": S, "seconds": T,
     "samples_per_s": S/T}
"""

import argparse
import json
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True,
                   help="MNIST root (contains MNIST/raw/*-ubyte)")
    p.add_argument("--batches", type=int, default=20, help="timed batches")
    p.add_argument("--warmup", type=int, default=2,
                   help="batches consumed before timing starts")
    p.add_argument("--workers", type=int, default=2,
                   help="DataLoader worker processes")
    p.add_argument("--batch-size", type=int, default=8192)
    args = p.parse_args(argv)
    if args.batches < 1:
        p.error("--batches must be >= 1")
    if args.warmup < 0 or args.workers < 0 or args.batch_size < 1:
        p.error("--warmup/--workers must be >= 0 and --batch-size >= 1")
    return args


def log(msg):
    print(f"w1_torch: {msg}", file=sys.stderr, flush=True)


def worker_init(_worker_id):
    # DataLoader already does this in every worker; repeated here so the
    # peer's configuration is explicit.
    import torch
    torch.set_num_threads(1)


def main(argv=None):
    args = parse_args(argv)

    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    raw = os.path.join(args.data, "MNIST", "raw")
    needed = [f"{s}-{k}-ubyte" for s in ("train", "t10k")
              for k in ("images-idx3", "labels-idx1")]
    missing = [n for n in needed if not os.path.isfile(os.path.join(raw, n))]
    if missing:
        sys.exit(f"w1_torch: missing MNIST files in {raw}: {', '.join(missing)}")

    transform = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize((0.1307,), (0.3081,)),
        transforms.GaussianBlur(11),  # sigma ~ U(0.1, 2.0) per sample
    ])
    dataset = datasets.MNIST(root=args.data, train=True, download=False,
                             transform=transform)
    if len(dataset) < args.batch_size:
        sys.exit(f"w1_torch: dataset has {len(dataset)} samples, fewer than "
                 f"one batch of {args.batch_size} (drop_last=True)")

    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        num_workers=args.workers,
        shuffle=False,
        drop_last=True,
        persistent_workers=args.workers > 0,
        worker_init_fn=worker_init if args.workers > 0 else None,
    )
    log(f"{len(dataset)} samples, batch {args.batch_size}, "
        f"{args.workers} workers, {len(loader)} batches/epoch; "
        f"warmup {args.warmup}, timed {args.batches}")

    def batches():
        while True:  # as many epochs as it takes
            for b in loader:
                yield b

    it = batches()
    t_start = time.perf_counter()
    for i in range(args.warmup):
        x, _ = next(it)
        log(f"warmup batch {i + 1}/{args.warmup} {tuple(x.shape)}")
    log(f"warmup done in {time.perf_counter() - t_start:.2f}s")

    samples = 0
    t0 = time.perf_counter()
    for i in range(args.batches):
        x, y = next(it)
        samples += int(y.shape[0])
        if (i + 1) % 5 == 0 or i + 1 == args.batches:
            dt = time.perf_counter() - t0
            log(f"batch {i + 1}/{args.batches}: {samples / dt:.0f} samples/s")
    seconds = time.perf_counter() - t0

    result = {"peer": "torch", "workload": "w1", "samples": samples,
              "seconds": round(seconds, 6),
              "samples_per_s": round(samples / seconds, 3)}
    del it, loader
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
