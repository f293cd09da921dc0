#!/usr/bin/env python3
"""W3 from WebDataset shards with the webdataset library: each DataLoader
worker reads whole shards (webdataset's split_by_worker), decodes with PIL
and applies torchvision's RandomResizedCrop(224), RandomHorizontalFlip,
ToTensor and Normalize, as the library's ImageNet example does.

Runs in the venv of bench/peers/ensure_wds_venv.sh (webdataset over
Debian's python3 with python3-torch, python3-torchvision, python3-pil).

    PY bench/peers/w3_webdataset.py --data DIR [--batches 8] [--warmup 1]
        [--workers 2] [--batch-size 256] [--urls FILE]

DIR holds the *.tar shards (bench/peers/make_shards.py). --urls reads the
shards' URLs from FILE instead, one a line, as the library takes them: a
shard in an object store is `pipe:` a command that writes it to stdout, as
its docs show (`pipe:curl -s URL`; for S3, curl with --aws-sigv4). The last
line on stdout is one JSON object with "samples_per_s".
"""

import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_loader_args, epochs, make_logger,  # noqa: E402
                         print_result, time_batches)

log = make_logger("w3_webdataset")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "folder of WebDataset *.tar shards", 256, workers_help="DataLoader worker processes")
    p.add_argument("--urls", help="a file of shard URLs, one a line (then --data only names them)")
    args = p.parse_args(argv)
    check_loader_args(p, args)
    if args.urls:
        with open(args.urls) as f:
            shards = [line.strip() for line in f if line.strip()]
    else:
        shards = sorted(glob.glob(os.path.join(args.data, "*.tar")))
    if not shards:
        sys.exit(f"w3_webdataset: no *.tar shards in {args.urls or args.data}")

    import torch
    import webdataset as wds
    from torch.utils.data import DataLoader
    from torchvision import transforms

    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(),
                             transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    dataset = (wds.WebDataset(shards, shardshuffle=len(shards))
               .decode("pil").to_tuple("jpg;jpeg;png", "cls").map_tuple(tf, int))
    loader = DataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers,
                        persistent_workers=args.workers > 0)
    torch.set_num_threads(1)
    log(f"{len(shards)} shards, batch {args.batch_size}, {args.workers} workers; "
        f"warmup {args.warmup}, timed {args.batches}")
    it = epochs(loader, "w3_webdataset", args.batch_size)
    result = time_batches(it, args.warmup, args.batches, "webdataset", "w3", log)
    del it, loader
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
