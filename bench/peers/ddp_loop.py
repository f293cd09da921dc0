"""The data-parallel training loop the DDP benchmark (bench/ddp_bench.py)
runs on every rank, whichever loader feeds it: a small model under DDP
(gloo, one all-reduce per step), warm-up steps, then timed steps between
barriers. Torch only (1.13 under Debian's /usr/bin/python3 for the
DataLoader peer, the CPU wheel in .venv for sluice).

Rank 0 writes one JSON object to OUT: the job's samples/s (every rank's
samples over the timed wall time), each rank's process CPU over that time
(the trainer's own, not its DataLoader workers'), the first batch's
latency and the output's dtype and shape, and the whole machine's busy CPU
over that time per 1,000 samples (/proc/stat: trainers, loaders, a node
pool's processes alike), which says whether the cores were the bound.
"""

import atexit
import gc
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _machine_busy_seconds():
    """CPU seconds every core of the machine has spent busy since boot."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # user..steal; guest time is within user


def _epochs(loader, set_epoch):
    """Batches (image tensor, samples) epoch after epoch."""
    epoch = 0
    while True:
        set_epoch(epoch)
        for batch in loader:
            yield batch
        epoch += 1


def run(loader, set_epoch, image_of, warmup, steps, out, extra=None):
    """Trains on `steps` batches after `warmup` and has rank 0 write the
    result to `out`. `image_of(batch)` is the batch's NCHW float32 images."""
    rank = dist.get_rank()
    started = time.perf_counter()
    batches = _epochs(loader, set_epoch)
    first = image_of(next(batches))
    first_batch_s = time.perf_counter() - started
    channels = first.shape[1]
    output = f"{str(first.dtype).replace('torch.', '')}[{','.join(map(str, first.shape[1:]))}]"
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(channels, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(images):
        loss = model(images.mean(dim=(2, 3))).square().mean()
        optimizer.zero_grad()
        loss.backward()  # the all-reduce: every rank takes every step
        optimizer.step()
        return images.shape[0]

    step(first)
    del first  # a batch kept alive holds its loader's buffers (sluice's ring, pinned memory)
    for _ in range(warmup):
        step(image_of(next(batches)))
    dist.barrier()
    t0, cpu0, busy0 = time.perf_counter(), _cpu_seconds(), _machine_busy_seconds()
    samples = sum(step(image_of(next(batches))) for _ in range(steps))
    dist.barrier()
    seconds, busy = time.perf_counter() - t0, _machine_busy_seconds() - busy0
    mine = {"samples": samples, "cpu_share": (_cpu_seconds() - cpu0) / seconds, "first_batch_s": first_batch_s}
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if rank == 0:
        total = sum(r["samples"] for r in everyone)
        result = {"samples_per_s": total / seconds, "seconds": seconds,
                  "machine_cpu_ms_per_1k": busy / total * 1e6, "machine_cores_busy": busy / seconds,
                  "trainer_cpu": [round(r["cpu_share"], 3) for r in everyone],
                  "first_batch_s": max(r["first_batch_s"] for r in everyone),
                  "output": output,
                  **(extra or {})}
        with open(out, "w") as f:
            json.dump(result, f)
    dist.barrier()


def end_job():
    """Ends a peer's rank as sluice.torch.exit_rank() ends sluice's (see its
    reason there): the DataLoader peers run under Debian's python3, which
    has torchvision but not sluice."""
    gc.collect()
    dist.destroy_process_group()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
