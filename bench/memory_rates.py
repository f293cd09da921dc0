"""Throughput, time to the first batch, peak RSS and the engine's peak in
use of `sluice run` under memory budgets, interleaved runs (each round starting one configuration
later), medians; optionally beside another build
of `sluice` (the one before a change).

    .venv/bin/python bench/memory_rates.py --data data [--runs 5]
        [--before /path/to/old/sluice] [--w2-epochs 3] [--w3-epochs 3] [--shards]

Configurations: W3 and W2 at the default budget, W3 under 256 MiB and
2 GiB, W2 under 64 MiB and 2 GiB, with --shards W3 from WebDataset shards
with eight read ahead under 256 MiB and 2 GiB, and each workload at its
first budget in the `--before` build when given. Prints a table, then one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILT = os.path.join(ROOT, "build", "src", "sluice", "cli", "sluice")


def shards_read_ahead(spec):
    """W3 from its WebDataset shards (bench/peers/make_shards.py), eight
    shards read ahead: the source's read-ahead waits for room too."""
    spec["nodes"][0] = {"source": {"webdataset": {"files": ["data/imagenet-shards/*.tar"]},
                                   "shuffle_splits": True, "parallel_reads": 8}}
    return spec


def pipeline_file(name, data, budget_mib, tmp, change=None):
    """The workload's JSON, changed by `change`, with its data under `data`
    and the budget set (0: left unset)."""
    spec = json.load(open(os.path.join(ROOT, "pipelines", name)))
    if change:
        spec = change(spec)
    text = json.dumps(spec).replace('"data/', f'"{data}/')
    spec = json.loads(text)
    if budget_mib:
        spec.setdefault("options", {})["memory_budget_bytes"] = budget_mib << 20
    path = os.path.join(tmp, f"{name[:-5]}_{change.__name__ if change else ''}_{budget_mib}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def run(binary, path, epochs):
    out = subprocess.run([binary, "run", path, "--epochs", str(epochs), "--json", "--quiet"],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return {"samples_per_s": r["samples_per_s"], "first_batch_ms": r["first_batch_ms"],
            "peak_rss_mb": r["peak_rss_mb_after_epoch"][-1],
            "engine_peak_in_use_mb": r["engine_peak_in_use_bytes"] / 1e6}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--before", help="another build's sluice binary, run at its default")
    p.add_argument("--sluice", default=BUILT, help="the sluice binary to measure")
    p.add_argument("--w2-epochs", type=int, default=3)
    p.add_argument("--w3-epochs", type=int, default=3)
    p.add_argument("--shards", action="store_true",
                   help="also W3 from WebDataset shards (under --data) with eight read ahead")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        configs = []
        workloads = [("W3", "w3_imagenet.json", args.w3_epochs, (0, 256, 2048), None),
                     ("W2", "w2_cifar10.json", args.w2_epochs, (0, 64, 2048), None)]
        if args.shards:
            workloads.append(("W3 shards x8", "w3_imagenet.json", args.w3_epochs, (256, 2048), shards_read_ahead))
        for label, name, epochs, budgets, change in workloads:
            for budget in budgets:
                configs.append((f"{label} {'default' if budget == 0 else f'{budget} MiB'}", args.sluice,
                                pipeline_file(name, args.data, budget, tmp, change), epochs))
            if args.before:
                budget = budgets[0]
                configs.append((f"{label} before, {'default' if budget == 0 else f'{budget} MiB'}", args.before,
                                pipeline_file(name, args.data, budget, tmp, change), epochs))
        results = {c[0]: [] for c in configs}
        for i in range(args.runs):
            print(f"run {i + 1}/{args.runs}", file=sys.stderr, flush=True)
            # Each round starts one configuration later, so none always
            # follows the same one (the first W3 run after W2's ran 5-10%
            # slower, whichever it was).
            for label, binary, path, epochs in configs[i % len(configs):] + configs[:i % len(configs)]:
                results[label].append(run(binary, path, epochs))
    rows = []
    for label, runs in results.items():
        rows.append({"config": label, **{k: statistics.median(r[k] for r in runs) for k in runs[0]},
                     "runs": runs})
    print(f"{'config':<28} {'samples/s':>10} {'first batch ms':>15} {'peak RSS MB':>12} {'in use MB':>10}")
    for r in rows:
        print(f"{r['config']:<28} {r['samples_per_s']:>10,.0f} {r['first_batch_ms']:>15.1f} {r['peak_rss_mb']:>12.1f}"
              f" {r['engine_peak_in_use_mb']:>10.1f}")
    print(json.dumps(rows))


main()
