"""Timing one run of each side, for the benches that set the user's Python
code in sluice against a DataLoader (bench/python_ops_w2.py,
bench/python_dataset_pil.py)."""

import argparse
import json
import os
import subprocess
import time


def arguments(doc, data_help):
    """The options both benches take: --data, --runs, --processes (sluice's
    Python pool) and --workers (the DataLoader's)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    parser.add_argument("--data", default=os.path.join(root, "data"), help=data_help)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2, help="sluice's Python pool")
    parser.add_argument("--workers", type=int, default=2, help="the DataLoader's workers")
    return parser.parse_args()


def sluice_run(pipe, warmup=2, batches=20):
    """(samples/s, trainer CPU ms per 1,000 samples) of `pipe`, timed as the
    peers time themselves (bench/peers/peer_timing.py): `warmup` batches
    consumed first, then `batches` timed, epoch after epoch as needed."""
    def endless():
        while True:
            yield from pipe
    it = endless()
    for _ in range(warmup):
        next(it)
    start, cpu = time.perf_counter(), time.process_time()
    samples = sum(len(next(it)["label"]) for _ in range(batches))
    return samples / (time.perf_counter() - start), (time.process_time() - cpu) / samples * 1000


def peer_run(command):
    """(samples/s, trainer CPU ms per 1,000 samples, output) of a peer script
    (bench/peers/peer_timing.py's JSON on its last line)."""
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["samples_per_s"], result["trainer_cpu_s"] / result["samples"] * 1000, result["output"]
