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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_loader_args, epochs, make_logger,  # noqa: E402
                         print_result, time_batches)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "MNIST root (contains MNIST/raw/*-ubyte)", 8192,
                    workers_help="DataLoader worker processes")
    args = p.parse_args(argv)
    check_loader_args(p, args)
    return args


log = make_logger("w1_torch")


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

    it = epochs(loader, "w1_torch", args.batch_size)
    result = time_batches(it, args.warmup, args.batches, "torch", "w1", log)
    del it, loader
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
