#!/usr/bin/python3
"""W5a peers: CIFAR-10's standard training augmentation in a torch DataLoader.

Pad 4 (reflect) + random crop 32, horizontal flip, ToTensor + per-channel
normalize, batch 256, NCHW float32 out, from the same TFRecords as sluice.

    /usr/bin/python3 bench/peers/w5a_torch.py --data DIR [--expert]
        [--batches 20] [--warmup 2] [--workers 2] [--batch-size 256]

Default: torchvision's transforms per sample (transforms.v2 where the
installed torchvision has it; Debian 12's 0.14 has only v1, whose
RandomCrop, RandomHorizontalFlip and Normalize are the same ops), the way
the CIFAR examples write it. --expert: what a skilled user writes instead:
each worker fills whole uint8 batches, pads the batch once with numpy,
cuts every crop (flipped or not) with one fancy-indexing gather, and
normalizes the batch into NCHW float32 in three vectorized passes.
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
from w2_torch import (cifar_examples, load_example_pb2, tfrecord_dataset, tfrecord_files,  # noqa: E402
                      worker_init, worker_share)

log = make_logger("w5a_torch")

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "directory of *.tfrecord files", 256, workers_help="DataLoader worker processes")
    p.add_argument("--expert", action="store_true", help="whole batches per worker, numpy-vectorized")
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


def expert_dataset(files, example_pb2, batch_size):
    import numpy as np
    import torch
    from torch.utils.data import IterableDataset

    scale = (1 / (255.0 * np.array(STD))).astype(np.float32).reshape(1, 3, 1, 1)
    shift = (-np.array(MEAN) / np.array(STD)).astype(np.float32).reshape(1, 3, 1, 1)
    steps = np.arange(32)

    class Batches(IterableDataset):
        def __iter__(self):
            rng = np.random.default_rng()
            images = np.empty((batch_size, 32, 32, 3), np.uint8)
            labels = np.empty(batch_size, np.int64)
            n = 0
            for raw, label in cifar_examples(example_pb2, *worker_share(files)):
                images[n] = np.frombuffer(raw, np.uint8).reshape(32, 32, 3)
                labels[n] = label
                n += 1
                if n < batch_size:
                    continue
                n = 0
                padded = np.pad(images, ((0, 0), (4, 4), (4, 4), (0, 0)), mode="reflect")
                top = rng.integers(0, 9, batch_size)[:, None, None]
                left = rng.integers(0, 9, batch_size)[:, None]
                cols = np.where(rng.random(batch_size)[:, None] < 0.5, left + steps, left + 31 - steps)
                crops = padded[np.arange(batch_size)[:, None, None], top + steps[None, :, None], cols[:, None, :]]
                x = crops.transpose(0, 3, 1, 2).astype(np.float32)
                x *= scale
                x += shift
                yield torch.from_numpy(x), torch.from_numpy(labels.copy())
            # the partial last batch is dropped, as drop_last=True would

    return Batches()


def main(argv=None):
    args = parse_args(argv)
    files = tfrecord_files(args.data, "w5a_torch")
    example_pb2 = load_example_pb2()
    from torch.utils.data import DataLoader

    if args.expert:  # the workers hand on whole batches
        loader = DataLoader(expert_dataset(files, example_pb2, args.batch_size), batch_size=None,
                            num_workers=args.workers, persistent_workers=args.workers > 0,
                            worker_init_fn=worker_init if args.workers > 0 else None)
    else:
        loader = DataLoader(torchvision_dataset(files, example_pb2), batch_size=args.batch_size, drop_last=True,
                            num_workers=args.workers, persistent_workers=args.workers > 0,
                            worker_init_fn=worker_init if args.workers > 0 else None)
    log(f"{len(files)} files, batch {args.batch_size}, {args.workers} workers, "
        f"{'expert (numpy, whole batches)' if args.expert else 'torchvision per sample'}; "
        f"warmup {args.warmup}, timed {args.batches}")

    it = epochs(loader, "w5a_torch", args.batch_size)
    result = time_batches(it, args.warmup, args.batches, "expert (numpy)" if args.expert else "torch", "w5a", log)
    del it, loader
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
