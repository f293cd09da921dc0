#!/usr/bin/python3
"""W5a peers: CIFAR-10's standard training augmentation in a torch DataLoader.

Pad 4 (reflect) + random crop 32, horizontal flip, ToTensor + per-channel
normalize, batch 256, NCHW float32 out, from the same TFRecords as sluice.

    /usr/bin/python3 bench/peers/w5a_torch.py --data DIR [--expert [--variant both|torch|numpy]]
        [--batches 20] [--warmup 2] [--workers 2] [--batch-size 256]

Default: torchvision's transforms per sample (transforms.v2 where the
installed torchvision has it; Debian 12's 0.14 has only v1, whose
RandomCrop, RandomHorizontalFlip and Normalize are the same ops), the way
the CIFAR examples write it. --expert: what a skilled user writes instead:
the whole dataset in memory as uint8, reflect-padded once; each batch's
crops (flipped or not) cut with one gather and normalized into NCHW
float32, with torch ops on all cores and with numpy; the faster of the
two is the result (--variant times one).
Records are parsed with Google protobuf, as in w2_torch.py. Runs under
Debian's /usr/bin/python3 (python3-torch, python3-torchvision,
python3-protobuf; `protoc` on PATH).

Progress goes to stderr; the last line on stdout is one JSON object, as
peer_timing.print_result writes it.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_loader_args, epochs, make_logger,  # noqa: E402
                         print_result, time_batches)
from w2_torch import cifar_examples, load_example_pb2, tfrecord_dataset, tfrecord_files, worker_init  # noqa: E402

log = make_logger("w5a_torch")

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "directory of *.tfrecord files", 256, workers_help="DataLoader worker processes")
    p.add_argument("--expert", action="store_true",
                   help="the dataset in memory, whole batches with torch ops or numpy (the faster is reported)")
    p.add_argument("--variant", choices=("both", "torch", "numpy"), default="both",
                   help="--expert: which variants to time")
    args = p.parse_args(argv)
    check_loader_args(p, args)
    return args


def torchvision_dataset(files, example_pb2):
    import torch
    try:
        from torchvision.transforms import v2 as T
        to_float = [T.ToDtype(torch.float32, scale=True)]
    except ImportError:
        from torchvision import transforms as T
        to_float = [T.ConvertImageDtype(torch.float32)]
    augment = T.Compose([T.RandomCrop(32, padding=4, padding_mode="reflect"), T.RandomHorizontalFlip(),
                         *to_float, T.Normalize(MEAN, STD)])

    def transform(image_bytes):
        x = torch.frombuffer(bytearray(image_bytes), dtype=torch.uint8).view(32, 32, 3).permute(2, 0, 1)
        return augment(x)

    return tfrecord_dataset(files, example_pb2, transform)


def load_padded(files, example_pb2):
    """The whole dataset in memory as uint8 NHWC, reflect-padded by 4 once,
    and its labels."""
    import numpy as np
    raws, labels = [], []
    for raw, label in cifar_examples(example_pb2, files):
        raws.append(raw)
        labels.append(label)
    images = np.frombuffer(b"".join(raws), np.uint8).reshape(len(raws), 32, 32, 3)
    return np.pad(images, ((0, 0), (4, 4), (4, 4), (0, 0)), mode="reflect"), np.array(labels, np.int64)


def torch_batches(padded, labels, batch_size):
    """Whole batches with torch ops on all cores: every crop's bytes (flipped
    or not) gathered with one `take` of linear indices, straight into NCHW,
    then one conversion and one fused multiply-add normalize them."""
    import torch
    torch.set_num_threads(os.cpu_count())
    n, height, width, _ = padded.shape
    flat = torch.from_numpy(padded).permute(0, 3, 1, 2).contiguous().view(-1)  # N, 3, 40, 40
    labels = torch.from_numpy(labels)
    scale = torch.tensor([1 / (255.0 * s) for s in STD]).view(1, 3, 1, 1)
    shift = torch.tensor([-m / s for m, s in zip(MEAN, STD)]).view(1, 3, 1, 1)
    steps = torch.arange(32)
    channels = (torch.arange(3) * height * width).view(1, 3, 1, 1)
    while True:
        order = torch.randperm(n)
        for start in range(0, n - batch_size + 1, batch_size):
            idx = order[start:start + batch_size]
            top = torch.randint(0, 9, (batch_size, 1))
            left = torch.randint(0, 9, (batch_size, 1))
            flip = torch.rand(batch_size, 1) < 0.5
            rows = ((top + steps) * width).view(batch_size, 1, 32, 1)
            cols = torch.where(flip, left + 31 - steps, left + steps).view(batch_size, 1, 1, 32)
            crops = flat.take((idx * 3 * height * width).view(batch_size, 1, 1, 1) + channels + rows + cols)
            yield torch.addcmul(shift, crops.to(torch.float32), scale), labels[idx]


def numpy_batches(padded, labels, batch_size):
    """The same with numpy: one fancy-indexing gather, then NCHW float32 in
    three vectorized passes."""
    import numpy as np
    rng = np.random.default_rng()
    scale = (1 / (255.0 * np.array(STD))).astype(np.float32).reshape(1, 3, 1, 1)
    shift = (-np.array(MEAN) / np.array(STD)).astype(np.float32).reshape(1, 3, 1, 1)
    steps = np.arange(32)
    while True:
        order = rng.permutation(len(labels))
        for start in range(0, len(labels) - batch_size + 1, batch_size):
            idx = order[start:start + batch_size]
            top = rng.integers(0, 9, batch_size)[:, None, None]
            left = rng.integers(0, 9, batch_size)[:, None]
            cols = np.where(rng.random(batch_size)[:, None] < 0.5, left + steps, left + 31 - steps)
            crops = padded[idx[:, None, None], top + steps[None, :, None], cols[:, None, :]]
            x = crops.transpose(0, 3, 1, 2).astype(np.float32)
            x *= scale
            x += shift
            yield x, labels[idx]


def expert(args, files, example_pb2):
    """Times each variant the expert may write, and returns the faster one's result."""
    padded, labels = load_padded(files, example_pb2)
    log(f"{len(labels)} samples in memory, padded: {padded.nbytes / 1e6:.0f} MB")
    results = []
    for name, make in (("torch", torch_batches), ("numpy", numpy_batches)):
        if args.variant not in (name, "both"):
            continue
        result = time_batches(make(padded, labels, args.batch_size), args.warmup, args.batches,
                              f"expert (in memory, {name})", "w5a", log)
        log(f"{name}: {result['samples_per_s']:,.0f} samples/s")
        results.append(result)
    return max(results, key=lambda r: r["samples_per_s"])


def main(argv=None):
    args = parse_args(argv)
    files = tfrecord_files(args.data, "w5a_torch")
    example_pb2 = load_example_pb2()
    if args.expert:
        print_result(expert(args, files, example_pb2))
        return 0
    from torch.utils.data import DataLoader

    loader = DataLoader(torchvision_dataset(files, example_pb2), batch_size=args.batch_size, drop_last=True,
                        num_workers=args.workers, persistent_workers=args.workers > 0,
                        worker_init_fn=worker_init if args.workers > 0 else None)
    log(f"{len(files)} files, batch {args.batch_size}, {args.workers} workers, torchvision per sample; "
        f"warmup {args.warmup}, timed {args.batches}")
    it = epochs(loader, "w5a_torch", args.batch_size)
    result = time_batches(it, args.warmup, args.batches, "torch", "w5a", log)
    del it, loader
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
