"""W2's augmentation on the GPU in a training loop: the CPU reads and parses
the CIFAR-10 TFRecords, a map with device="cuda" after the batch dilates,
blurs, rescales, flips, rotates and zooms on the GPU, and the model takes
the CUDA tensors as they come (no copy, no synchronization: torch's stream
waits for sluice's kernels).

    sluice make-data cifar10 --out data/cifar10
    python examples/gpu_tail.py data/cifar10 [--steps 200]

Needs a CUDA build of sluice (docs/gpu.md) and a GPU.
"""

import argparse
import sys
import time

import torch

import sluice
import sluice.torch
from sluice import ops


def pipeline(files):
    return (sluice.tfrecord(files, {"image": ("bytes", 3072), "label": "int64"}, parallel_reads=8)
            .repeat()
            .map(ops.decode_raw(dtype="uint8"), ops.reshape(shape=[32, 32, 3]))
            .batch(1024, drop_remainder=True)
            .map(ops.grey_dilation(size=3), ops.gaussian_blur(ksize=11, sigma=[0.8]),
                 ops.rescale(scale=1 / 255), ops.random_flip(mode="horizontal"),
                 ops.random_rotation(degrees=36.0, fill_mode="reflect"),
                 ops.random_zoom(scale=[0.9, 1.1], fill_mode="reflect"), device="cuda")
            .prefetch())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="directory of CIFAR-10 *.tfrecord files")
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_tail: no CUDA device")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(32, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = sluice.torch.TorchIterable(pipeline(f"{args.data}/*.tfrecord"))
    start, samples = time.perf_counter(), 0
    for step, batch in enumerate(loader):
        images = batch["image"].permute(0, 3, 1, 2)           # CUDA, NHWC -> NCHW view
        labels = batch["label"].cuda(non_blocking=True)       # pinned host memory
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        samples += images.shape[0]
        if step + 1 == args.steps:
            break
    torch.cuda.synchronize()
    print(f"{samples / (time.perf_counter() - start):,.0f} samples/s, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
