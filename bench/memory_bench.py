"""Memory of sluice pipelines over many epochs: RSS sampled every 100 ms
against what the engine says it holds (`pipe.memory()`), one fresh process
per workload.

    .venv/bin/python bench/memory_bench.py [--data data] [--epochs 100]
        [--w3-epochs 20] [--worker-epochs 100]
        [--workloads w1,w2,w3,w5b,w2_worker]
        [--budget-mb 0]

For each workload it reports the process's RSS before the pipeline, the
peak of RSS minus it, the engine's own peak (its buffers in use and cached
together, and the shared-memory rings of a local worker), their ratio
(goal <= 1.25), and how much RSS grows from epoch 2 on: the highest RSS of
the first tenth of the epochs after the first against that of the last
tenth (goal within 5%), and the same for the level RSS returns to, the
median of each tenth's epoch peaks (a block that one epoch needed and the
pool gave back later moves the first, not the second). The consumer keeps each batch until it has the
next, as a training loop does. Prints a table, then one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PAGE = os.sysconf("SC_PAGE_SIZE")
WORKLOADS = ("w1", "w2", "w3", "w5b", "w2_worker")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class RssSampler:
    """Samples this process's RSS every `period` seconds on a thread; the
    peak since the last `lap()`."""

    def __init__(self, period=0.1):
        self._period, self._peak, self._stop = period, 0, threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self._period):
            self.sample()

    def sample(self):
        value = rss_bytes()
        with self._lock:
            self._peak = max(self._peak, value)

    def lap(self):
        self.sample()
        with self._lock:
            peak, self._peak = self._peak, 0
        return peak

    def stop(self):
        self._stop.set()
        self._thread.join()


def pipeline(name, data, budget):
    import sluice
    from sluice import ops

    def from_file(path):
        text = open(os.path.join(ROOT, "pipelines", path)).read().replace('"data/', f'"{data}/')
        return sluice.Pipeline.from_json(text)

    if name == "w5b":
        pipe = (sluice.image_folder(os.path.join(data, "imagenet"))
                .map(ops.decode_random_resized_crop(size=[224]), ops.random_flip(mode="horizontal"),
                     ops.rand_augment(num_ops=2, magnitude=9), ops.crop_mirror_normalize(mirror=0))
                .batch(256, drop_remainder=True).prefetch())
    else:
        pipe = from_file({"w1": "w1_mnist.json", "w2": "w2_cifar10.json", "w3": "w3_imagenet.json",
                          "w2_worker": "w2_service.json"}[name])
    return pipe.with_options(memory_budget_bytes=budget << 20) if budget else pipe


def child(args):
    """Runs one workload in this process and prints one JSON line."""
    import sluice  # noqa: F401  (loads the library before the baseline)
    import numpy  # noqa: F401

    pipe = pipeline(args.child, args.data, args.budget_mb)
    baseline = rss_bytes()
    sampler = RssSampler()
    epoch_peaks, samples = [], 0
    start = time.perf_counter()
    for _ in range(args.epochs):
        held = None
        for held in pipe:  # keeps each batch until the next, as a training loop
            samples += len(next(iter(held.values())))
        del held
        epoch_peaks.append(sampler.lap())
    seconds = time.perf_counter() - start
    sampler.stop()
    memory = pipe.memory()
    growth = max(epoch_peaks) - baseline
    # Early (epochs 2 on) against late: the highest sampled RSS of a tenth of
    # the run at each end, so one 100 ms sample's luck is not growth.
    k = max(1, (len(epoch_peaks) - 1) // 10)
    early_peaks, late_peaks = epoch_peaks[1:1 + k] or epoch_peaks, epoch_peaks[-k:]
    early, late = max(early_peaks), max(late_peaks)
    early_level, late_level = statistics.median(early_peaks), statistics.median(late_peaks)
    print(json.dumps({
        "workload": args.child, "epochs": args.epochs, "samples_per_s": samples / seconds,
        "baseline_mb": baseline / 1e6, "rss_growth_mb": growth / 1e6,
        "engine_peak_mb": memory["peak_held"] / 1e6, "engine_peak_in_use_mb": memory["peak_in_use"] / 1e6,
        "budget_mb": memory["budget"] / 1e6, "ratio": growth / max(1, memory["peak_held"]),
        "growth_from_epoch_2": (late - early) / early,
        "level_growth_from_epoch_2": (late_level - early_level) / early_level,
        "epoch_peak_rss_mb": [round(p / 1e6, 1) for p in epoch_peaks]}))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--w3-epochs", type=int, default=20, help="epochs of W3")
    p.add_argument("--worker-epochs", type=int, default=100, help="epochs of W2 through a local worker")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--budget-mb", type=int, default=0, help="memory_budget_bytes in MiB (0: the default)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    rows = []
    for name in args.workloads.split(","):
        if name not in WORKLOADS:
            p.error(f"unknown workload {name!r}: one of {', '.join(WORKLOADS)}")
        epochs = {"w3": args.w3_epochs, "w2_worker": args.worker_epochs}.get(name, args.epochs)
        print(f"{name}: {epochs} epochs ...", file=sys.stderr, flush=True)
        out = subprocess.run([sys.executable, __file__, "--child", name, "--data", args.data,
                              "--epochs", str(epochs), "--budget-mb", str(args.budget_mb)],
                             check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    print(f"{'workload':<10} {'epochs':>6} {'samples/s':>10} {'base MB':>8} {'RSS+ MB':>8} {'engine MB':>9} "
          f"{'ratio':>6} {'growth':>7} {'level':>7}")
    for r in rows:
        print(f"{r['workload']:<10} {r['epochs']:>6} {r['samples_per_s']:>10,.0f} {r['baseline_mb']:>8.1f} "
              f"{r['rss_growth_mb']:>8.1f} {r['engine_peak_mb']:>9.1f} {r['ratio']:>6.2f} "
              f"{100 * r['growth_from_epoch_2']:>6.1f}% {100 * r['level_growth_from_epoch_2']:>6.1f}%")
    print(json.dumps(rows))


main()
