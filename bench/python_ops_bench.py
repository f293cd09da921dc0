"""The cost of the `python` op: an identity function of the user's, per
sample and per batch, against the same pipeline without it; per sample
also as a function named by import path ("identity:same", imported by the
processes), a lambda and a callable object (both sent by value).

    .venv/bin/python bench/python_ops_bench.py [--rows 50000] [--runs 5] [--processes 2]

The source is CIFAR-sized samples in memory (an int64 id and a uint8
[32, 32, 3] image), batched by 256. Epochs of the three pipelines are
interleaved; medians. The overhead per sample is 1/rate(with the op) −
1/rate(without): the copies into and out of shared memory, the socket
round trips, and the Python call (a dict in, a dict out, the outputs
checked). Prints a table, then one JSON line.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import sluice
from sluice import ops

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_ops"))
import identity  # noqa: E402

BATCH = 256


def rate(pipe):
    start = time.perf_counter()
    samples = sum(len(b["id"]) for b in pipe)
    return samples / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    images = np.random.default_rng(0).integers(0, 256, (args.rows, 32, 32, 3), dtype=np.uint8)
    source = sluice.arrays({"id": np.arange(args.rows, dtype=np.int64), "image": images})
    per_sample = {"per sample": identity.same, "by name": "identity:same", "lambda": lambda sample: sample,
                  "object": identity.Same()}
    pipes = {
        "without": source.batch(BATCH),
        **{name: source.map(ops.python(fn, processes=args.processes)).batch(BATCH) for name, fn in per_sample.items()},
        "per batch": source.batch(BATCH).map(ops.python(identity.same_batch, batched=True,
                                                        processes=args.processes)),
    }
    for pipe in pipes.values():
        rate(pipe)  # warm-up: processes started, buffers touched
    rates = {name: [] for name in pipes}
    for _ in range(args.runs):
        for name, pipe in pipes.items():
            rates[name].append(rate(pipe))
    medians = {name: statistics.median(r) for name, r in rates.items()}
    base = medians["without"]
    per_sample_us = {name: round((1 / medians[name] - 1 / base) * 1e6, 2) for name in per_sample}
    per_batch_us = (1 / medians["per batch"] - 1 / base) * 1e6 * BATCH
    for name, r in medians.items():
        print(f"{name:>10}: {r:,.0f} samples/s")
    print(f"identity ops.python: {per_sample_us['per sample']:.2f} us a sample per sample "
          f"(by name {per_sample_us['by name']:.2f}, a lambda {per_sample_us['lambda']:.2f}, "
          f"a callable object {per_sample_us['object']:.2f}); "
          f"{per_batch_us:.1f} us a batch of {BATCH} with batched=True ({per_batch_us / BATCH:.3f} us a sample)")
    print(json.dumps({"bench": "python_ops", "cores": os.cpu_count(), "processes": args.processes, "batch": BATCH,
                      "samples_per_s": {k: round(v) for k, v in medians.items()},
                      "runs": {k: [round(x) for x in v] for k, v in rates.items()},
                      "per_sample_us": per_sample_us, "per_batch_us": round(per_batch_us, 1)}))


if __name__ == "__main__":
    main()
