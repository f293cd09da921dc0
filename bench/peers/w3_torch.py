#!/usr/bin/python3
"""W3 peer: torchvision ImageFolder + RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor, Normalize (train) or Resize(256),
CenterCrop(224), ToTensor, Normalize (eval), in a torch DataLoader; with
--rand-augment, W5b: RandAugment(2, 9) after the flip (torchvision's
defaults: nearest, fill 0).

Runs under Debian's /usr/bin/python3 (python3-torch, python3-torchvision,
python3-pil).

    /usr/bin/python3 bench/peers/w3_torch.py --data DIR [--mode train|eval]
        [--rand-augment] [--batches 8] [--warmup 1] [--workers 2] [--batch-size 256]

The last line on stdout is one JSON object with "samples_per_s".
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_batches, epochs, make_logger,  # noqa: E402
                         print_result, time_batches)

log = make_logger("w3_torch")


def make_loader(folder, batch_size, workers, mode="train", rand_augment=False):
    """The DataLoader of W3 (or W5b with rand_augment, or W3's eval
    transforms with mode "eval") over the image folder `folder`."""
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    if mode == "train":
        augment = [transforms.RandAugment(num_ops=2, magnitude=9)] if rand_augment else []
        tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), *augment,
                                 transforms.ToTensor(), normalize])
    else:
        tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                                 transforms.ToTensor(), normalize])
    dataset = datasets.ImageFolder(folder, transform=tf)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                      drop_last=True, persistent_workers=workers > 0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "ImageFolder root (class folders of JPEGs)", 256,
                    workers_help="DataLoader worker processes")
    p.add_argument("--mode", choices=["train", "eval"], default="train")
    p.add_argument("--rand-augment", action="store_true", help="W5b: RandAugment(2, 9) after the flip (train)")
    args = p.parse_args(argv)
    check_batches(p, args)

    import torch
    loader = make_loader(args.data, args.batch_size, args.workers, args.mode, args.rand_augment)
    log(f"{len(loader.dataset)} images, mode {args.mode}, torch {torch.__version__}, {args.workers} workers")
    # The loader repeats: an epoch of the dataset may be shorter than the run.
    workload = "w5b" if args.rand_augment else "w3" if args.mode == "train" else "w3_eval"
    print_result(time_batches(epochs(loader, "w3_torch", args.batch_size), args.warmup, args.batches, "torch",
                              workload, log))


if __name__ == "__main__":
    main()
