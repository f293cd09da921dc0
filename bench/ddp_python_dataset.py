"""A torch Dataset that decodes and crops in __getitem__, under real
torch.distributed (gloo) with 2 ranks under torchrun, each step ending in
an all-reduce as DDP's would:

- sluice.from_dataset through sluice.torch (the shard right after the
  source: each rank's process makes only the items the rank keeps),
- the same with a shuffle(1) (which changes nothing) before the shard, so
  that every rank makes every item of the epoch (what sluice did before
  the source learned which rows its shard keeps),
- DataLoader + DistributedSampler(drop_last=True), the peer's way.

One Python process per rank makes the items in each (processes=1,
num_workers=1), on a 2-core machine: the ranks' two.

    .venv/bin/python bench/ddp_python_dataset.py [--runs 3] [--steps 40] [--json OUT]

Runs interleave; medians of the job's samples/s (both ranks' samples over
the slower rank's time, after a warm-up of 3 steps). Prints a table, then
one JSON line.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

BATCH = 32  # per rank
WARMUP = 3
KINDS = ("sluice", "sluice_every_item", "dataloader")


class Photos:
    """256 distinct 320x320 JPEGs held encoded; item i is one decoded with
    OpenCV, its centre 224x224 cropped and resized to 112x112 (uint8 HWC),
    and its label."""

    def __init__(self, n=4096):
        import cv2
        self.n = n
        rng = np.random.default_rng(0)
        self.jpegs = []
        for k in range(256):
            base = rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)
            image = cv2.resize(base, (320, 320), interpolation=cv2.INTER_CUBIC)
            self.jpegs.append(cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import cv2
        image = cv2.imdecode(np.frombuffer(self.jpegs[i % 256], np.uint8), cv2.IMREAD_COLOR)
        crop = image[48:272, 48:272]
        return {"image": cv2.resize(crop, (112, 112), interpolation=cv2.INTER_AREA), "label": i}


def loader(kind):
    if kind == "dataloader":
        import torch
        sampler = torch.utils.data.distributed.DistributedSampler(Photos(), drop_last=True, seed=0)
        return torch.utils.data.DataLoader(Photos(), batch_size=BATCH, sampler=sampler, num_workers=1,
                                           drop_last=True, persistent_workers=True)
    import sluice
    import sluice.torch
    pipe = sluice.from_dataset(Photos(), processes=1)
    if kind == "sluice_every_item":
        pipe = pipe.shuffle(1)
    return sluice.torch.TorchIterable(pipe.batch(BATCH).with_options(threads=1), quiet=True)


def rank_main(kind, steps, out):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    batches = iter(loader(kind))
    total = torch.zeros(1)
    for _ in range(WARMUP):
        next(batches)
        dist.all_reduce(total)
    start = time.perf_counter()
    for _ in range(steps):
        batch = next(batches)
        total += float(batch["image"].float().mean())
        dist.all_reduce(total)
    elapsed = time.perf_counter() - start
    with open(f"{out}.{dist.get_rank()}", "w") as f:
        json.dump({"seconds": elapsed, "samples": steps * BATCH}, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job(kind, steps, tmp):
    out = os.path.join(tmp, kind)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
               f"--master_port={free_port()}", os.path.abspath(__file__), "--rank-job", kind, "--steps",
               str(steps), "--out", out]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    ranks = []
    for r in range(2):
        with open(f"{out}.{r}") as f:
            ranks.append(json.load(f))
    return sum(r["samples"] for r in ranks) / max(r["seconds"] for r in ranks)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--rank-job", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_job:
        return rank_main(args.rank_job, args.steps, args.out)
    rates = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for kind in KINDS:
                rates[kind].append(job(kind, args.steps, tmp))
                print(f"ddp_python_dataset: run {run + 1}/{args.runs} {kind}: {rates[kind][-1]:,.0f} samples/s",
                      file=sys.stderr, flush=True)
    medians = {k: statistics.median(v) for k, v in rates.items()}
    print(f"{'loader':<20} {'samples/s':>10} {'vs DataLoader':>14}")
    for kind in KINDS:
        print(f"{kind:<20} {medians[kind]:>10,.0f} {medians[kind] / medians['dataloader']:>13.2f}x")
    result = {"runs": rates, "medians": medians, "ranks": 2, "batch_per_rank": BATCH}
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
