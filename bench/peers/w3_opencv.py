#!/usr/bin/python3
"""W3 expert peer: an all-OpenCV torch DataLoader over an image folder, as a
skilled user writes it without torchvision.

Per sample: cv2.imdecode, torchvision's RandomResizedCrop box (scale 0.08-1,
ratio 3/4-4/3, ten tries, then the centre crop), the crop resized to 224 by
cv2.resize (bilinear), a horizontal flip half the time, written into a
uint8 NHWC batch. Each worker fills whole batches and turns each into NCHW
float32 normalized by ImageNet's mean and std once, with torch ops; the
DataLoader hands those batches on (batch_size=None). The same outputs as
pipelines/w3_imagenet.json. Runs under any python with numpy, OpenCV and
torch (.venv, or Debian's /usr/bin/python3 with python3-opencv).

    python bench/peers/w3_opencv.py --data DIR [--batches 8] [--warmup 1]
        [--workers 2] [--batch-size 256]

Progress goes to stderr; the last line on stdout is one JSON object, as
peer_timing.print_result writes it.
"""

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_loader_args, epochs, make_logger,  # noqa: E402
                         print_result, time_batches)
from w3_spdl import MEAN, STD, crop_window  # noqa: E402  (torchvision's crop box; imports no SPDL)

log = make_logger("w3_opencv")
SIZE = 224


def list_images(root):
    """[(path, label)] of an ImageFolder: class folders in sorted order."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    return [(os.path.join(root, c, f), label) for label, c in enumerate(classes)
            for f in sorted(os.listdir(os.path.join(root, c)))]


def augment_into(encoded, rng, out):
    """Decodes the image bytes `encoded` (a uint8 array), crops
    torchvision's RandomResizedCrop box, resizes it into `out` (SIZE x SIZE
    x 3 uint8, BGR) and flips it half the time; `rng` is a random.Random."""
    import cv2
    img = cv2.imdecode(encoded, cv2.IMREAD_COLOR)
    if img is None:
        raise ValueError(f"cv2.imdecode cannot decode {len(encoded)} bytes starting {bytes(encoded[:8]).hex()}")
    x, y, w, h = crop_window(img.shape[1], img.shape[0], rng)
    cv2.resize(img[y:y + h, x:x + w], (SIZE, SIZE), dst=out, interpolation=cv2.INTER_LINEAR)
    if rng.random() < 0.5:
        cv2.flip(out, 1, dst=out)


def to_nchw(images):
    """A uint8 NHWC BGR batch (numpy) as NCHW float32 RGB, normalized by
    ImageNet's mean and std: once per batch, with torch ops."""
    import torch
    mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
    inv_std = 1 / (torch.tensor(STD).view(1, 3, 1, 1) * 255)
    x = torch.from_numpy(images[..., ::-1].copy()).permute(0, 3, 1, 2).float()
    return x.sub_(mean).mul_(inv_std).contiguous()


def build_dataset(root, batch_size, seed=0):
    import numpy as np
    import torch
    from torch.utils.data import IterableDataset, get_worker_info

    items = list_images(root)

    class Batches(IterableDataset):
        epoch = 0  # per worker process: persistent workers count their epochs

        def __iter__(self):
            info = get_worker_info()
            worker, workers = (info.id, info.num_workers) if info else (0, 1)
            # One order for all workers (each takes every workers-th item),
            # draws of each worker's own.
            order = list(range(len(items)))
            random.Random(f"{seed} {self.epoch}").shuffle(order)
            rng = random.Random(f"{seed} {self.epoch} {worker}")
            self.epoch += 1
            images = np.empty((batch_size, SIZE, SIZE, 3), np.uint8)
            labels = np.empty(batch_size, np.int64)
            n = 0
            for i in order[worker::workers]:
                path, label = items[i]
                augment_into(np.fromfile(path, np.uint8), rng, images[n])
                labels[n] = label
                n += 1
                if n == batch_size:
                    yield to_nchw(images), torch.from_numpy(labels.copy())
                    n = 0
            # the partial last batch is dropped, as drop_last=True would

    return Batches()


def worker_init(_worker_id):
    import cv2
    import torch
    torch.set_num_threads(1)
    cv2.setNumThreads(1)


def make_loader(root, batch_size, workers):
    from torch.utils.data import DataLoader
    return DataLoader(build_dataset(root, batch_size), batch_size=None, num_workers=workers,
                      persistent_workers=workers > 0, worker_init_fn=worker_init if workers > 0 else None)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "ImageFolder root (class folders of JPEGs)", 256, workers_help="DataLoader worker processes")
    args = p.parse_args(argv)
    check_loader_args(p, args)
    loader = make_loader(args.data, args.batch_size, args.workers)
    if args.workers == 0:
        worker_init(0)
    log(f"{len(list_images(args.data))} images, batch {args.batch_size}, {args.workers} workers; "
        f"warmup {args.warmup}, timed {args.batches}")
    result = time_batches(epochs(loader, "w3_opencv", args.batch_size), args.warmup, args.batches,
                          "expert (OpenCV)", "w3", log)
    del loader
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
