#!/usr/bin/env python3
"""torchvision.transforms.v2 on CUDA tensors: the peer of `sluice-bench gpu`'s
blur and warp kernels, on the same batches already on the device.

  blur  W1: 8192 x 1 x 28 x 28 float32, GaussianBlur(11, sigma=(0.1, 2.0))
  warp  W2: 1024 x 3 x 32 x 32 float32, RandomHorizontalFlip +
        RandomAffine(degrees=36, scale=(0.9, 1.1)) (bilinear; one warp)

A v2 transform on a batched tensor draws one set of random parameters per
call; sluice draws them per sample. Both are timed: "per_sample" calls the
transform on each sample (the same augmentation as sluice's: the equal-output
figure), "batched" once per batch (one sigma or one affine for all 8192 or
1024 samples: less than sluice does, the fastest a v2 user gets). Device
time from CUDA events, median of --runs runs. The last line on stdout is one
JSON object.
"""

import argparse
import json
import statistics

import torch
import torchvision
from torchvision.transforms import v2


def device_ms(fn, x, reps, runs):
    for _ in range(3):
        fn(x)
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn(x)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / reps)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    w1 = torch.rand(8192, 1, 28, 28, device="cuda", generator=gen)
    w2 = torch.rand(1024, 3, 32, 32, device="cuda", generator=gen)
    blur = v2.GaussianBlur(11, sigma=(0.1, 2.0))
    warp = v2.Compose([v2.RandomHorizontalFlip(), v2.RandomAffine(degrees=36, scale=(0.9, 1.1),
                                                                  interpolation=v2.InterpolationMode.BILINEAR)])
    def per_sample(transform, count):
        return lambda x: [transform(x[i:i + 1]) for i in range(count)]

    result = {"peer": "torchvision.transforms.v2 on CUDA", "torchvision": torchvision.__version__,
              "device": torch.cuda.get_device_name()}
    for name, transform, batch in (("blur", blur, w1), ("warp", warp, w2)):
        batched_ms = device_ms(transform, batch, args.reps, args.runs)
        sample_ms = device_ms(per_sample(transform, 256), batch, 1, args.runs) / 256
        result[f"{name}_batched_samples_per_s"] = batch.shape[0] / batched_ms * 1e3
        result[f"{name}_samples_per_s"] = 1e3 / sample_ms
    print(json.dumps(result))


if __name__ == "__main__":
    main()
