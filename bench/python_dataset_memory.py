"""Memory over many epochs of a 1 GB in-memory Python dataset (500,000
small Python objects: bench/python_ops/many_blobs.py): sluice.from_dataset
with 2 processes against a torch DataLoader with 2 persistent forked
workers (bench/peers/dataset_memory_torch.py, under /usr/bin/python3), the
RSS and PSS of each side's whole process tree after every epoch. PSS
shares each page among the processes mapping it, so its sum is what the
tree holds; forked workers' copy-on-read shows in it as growth.

    .venv/bin/python bench/python_dataset_memory.py [--epochs 20] [--items 500000] [--item-bytes 2048]

Prints both curves, each side's growth from its first epoch to its last,
then one JSON line.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import sluice

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "python_ops"))
sys.path.insert(0, os.path.join(HERE, "peers"))
from many_blobs import ManyBlobs  # noqa: E402
from peer_timing import tree_memory  # noqa: E402


def sluice_epochs(args):
    dataset = ManyBlobs(args.items, args.item_bytes)
    pipe = sluice.from_dataset(dataset, names=("blob", "index"), processes=2).batch(1024)
    rss, pss = tree_memory(os.getpid())
    out = {"before": {"rss": rss, "pss": pss}, "epochs": []}
    for epoch in range(args.epochs):
        start, samples = time.perf_counter(), 0
        for batch in pipe.iterate(epoch=epoch):
            samples += len(batch["index"])
        if samples != args.items:
            sys.exit(f"sluice: epoch {epoch} gave {samples} samples, not {args.items}")
        rss, pss = tree_memory(os.getpid())
        out["epochs"].append({"rss": rss, "pss": pss, "samples": samples,
                              "seconds": round(time.perf_counter() - start, 3)})
        print(f"sluice epoch {epoch + 1}: PSS {pss / 2**30:.2f} GiB, RSS {rss / 2**30:.2f} GiB", flush=True)
    return out


def peer_epochs(args):
    done = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "peers", "dataset_memory_torch.py"),
                           "--items", str(args.items), "--item-bytes", str(args.item_bytes),
                           "--epochs", str(args.epochs)], stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def growth(run, key):
    return run["epochs"][-1][key] / run["epochs"][0][key] - 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--items", type=int, default=500_000)
    parser.add_argument("--item-bytes", type=int, default=2048)
    args = parser.parse_args()
    runs = {"sluice.from_dataset": sluice_epochs(args), "DataLoader": peer_epochs(args)}
    gib = 2 ** 30
    print(f"\n{'epoch':>5} | " + " | ".join(f"{n} PSS / RSS GiB" for n in runs))
    for e in range(args.epochs):
        print(f"{e + 1:>5} | " + " | ".join(f"{r['epochs'][e]['pss'] / gib:>12.2f} / {r['epochs'][e]['rss'] / gib:.2f}"
                                            for r in runs.values()))
    for name, run in runs.items():
        seconds = sorted(e["seconds"] for e in run["epochs"])[len(run["epochs"]) // 2]
        print(f"{name}: before the first epoch PSS {run['before']['pss'] / gib:.2f} GiB; PSS grew "
              f"{growth(run, 'pss'):+.1%} and RSS {growth(run, 'rss'):+.1%} from epoch 1 to {args.epochs}; "
              f"median epoch {seconds:.2f} s")
    print(json.dumps({"bench": "python_dataset_memory", "items": args.items, "item_bytes": args.item_bytes,
                      "epochs": args.epochs, "runs": runs,
                      "pss_growth": {n: round(growth(r, "pss"), 4) for n, r in runs.items()},
                      "rss_growth": {n: round(growth(r, "rss"), 4) for n, r in runs.items()}}))


if __name__ == "__main__":
    main()
