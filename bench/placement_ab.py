"""Two sluice loaders beside one trainer load, in alternating blocks: each
block a fresh pipeline, warmed up, then measured. The trainer bench runs
each loader's five runs back to back, so drift of a shared host between
loaders shows up as a difference between them; here it falls on both.

    .venv/bin/python bench/placement_ab.py --data DATA --workload w2_cifar10 --load "model light"
        [--loaders "sluice,sluice auto"] [--blocks 5] [--steps 12] [--warmup 12] [--service-core N]

With --service-core, a dispatcher and one worker (`sluice worker --threads
1`) run pinned to core N, standing in for another machine, the trainer on
the other cores, and the loader "sluice auto service" is placement "auto"
with that dispatcher as its `placement_service`.

Prints each block, then the medians and their ratio (the second loader
over the first), and one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

import torch

import trainer_bench as tb

LOADERS = {**tb.SLUICE_LOADERS, "sluice auto service": {"auto": True}}


def start_service(core):
    """A dispatcher and one worker on `core`; returns (processes, address)."""
    pin = lambda: os.sched_setaffinity(0, {core})  # noqa: E731
    sluice_bin = os.path.join(os.path.dirname(sys.executable), "sluice")
    dispatcher = subprocess.Popen([sluice_bin, "dispatcher", "--host", "127.0.0.1", "--port", "0"],
                                  stdout=subprocess.PIPE, text=True, preexec_fn=pin)
    port = int(dispatcher.stdout.readline().split()[-1])
    address = f"127.0.0.1:{port}"
    worker = subprocess.Popen([sluice_bin, "worker", "--dispatcher", address, "--host", "127.0.0.1",
                               "--threads", "1"], stdout=subprocess.PIPE, text=True, preexec_fn=pin)
    worker.stdout.readline()
    return (dispatcher, worker), address


def block(args, loader):
    """(step ms, steps/s, samples/s) of one fresh pipeline, and its placement
    with the decisions that led there."""
    service = args.service if loader == "sluice auto service" else None
    pipe = tb.sluice_pipeline(args.workload, args.data, service=service, **LOADERS[loader])
    batches = tb.sluice_batches(pipe)
    load = tb.LOADS[args.load]
    trainer = None if load is None else tb.trainer_of(args.load, 1 if args.workload == "w1_mnist" else 3)
    pending = (lambda: tb.deciding(pipe)) if LOADERS[loader].get("auto") else (lambda: False)
    result = tb.measure(batches, trainer, args.steps, warmup_s=args.warmup, pending=pending)
    report = pipe.placement()
    return result, "; ".join([report["running"]["description"], *report["decisions"]])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--workload", default="w2_cifar10")
    p.add_argument("--load", default="model light", choices=list(tb.LOADS))
    p.add_argument("--loaders", default="sluice,sluice auto")
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=float, default=12.0)
    p.add_argument("--service-core", type=int, default=None,
                   help="run a dispatcher and one worker on this core, the trainer on the others")
    args = p.parse_args()
    loaders = args.loaders.split(",")
    if len(loaders) != 2 or not set(loaders) <= set(LOADERS):
        p.error(f"--loaders: two of {', '.join(LOADERS)}")
    if ("sluice auto service" in loaders) != (args.service_core is not None):
        p.error('--service-core goes with the loader "sluice auto service"')
    processes = ()
    if args.service_core is not None:
        processes, args.service = start_service(args.service_core)
        os.sched_setaffinity(0, os.sched_getaffinity(0) - {args.service_core})
    torch.set_num_threads(1)
    try:
        run_blocks(args, loaders)
    finally:
        for process in processes:
            process.kill()


def run_blocks(args, loaders):
    runs = {loader: [] for loader in loaders}
    for b in range(args.blocks):
        for loader in loaders:
            (step_ms, steps_s, samples_s), where = block(args, loader)
            runs[loader].append((step_ms, steps_s, samples_s))
            print(f"block {b + 1} {loader}: {step_ms:.1f} ms a step, {steps_s:.2f} steps/s ({where})",
                  file=sys.stderr, flush=True)
    medians = {loader: [statistics.median(r[i] for r in runs[loader]) for i in range(3)] for loader in loaders}
    first, second = loaders
    for loader in loaders:
        print(f"{loader}: {medians[loader][0]:.1f} ms a step, {medians[loader][1]:.2f} steps/s")
    print(f"{second} / {first}: {medians[second][1] / medians[first][1]:.2f}x steps/s")
    print(json.dumps({"workload": args.workload, "load": args.load, "medians": medians}))


if __name__ == "__main__":
    main()
