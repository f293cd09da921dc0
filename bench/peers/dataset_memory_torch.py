#!/usr/bin/python3
"""The memory peer of bench/python_dataset_memory.py: a torch DataLoader
(2 persistent forked workers, batches of 1,024) over bench/python_ops/
many_blobs.py's ManyBlobs, epoch after epoch; after each epoch, the RSS and
PSS of this process and its workers (peer_timing.tree_memory).

    /usr/bin/python3 bench/peers/dataset_memory_torch.py [--items 500000]
        [--item-bytes 2048] [--epochs 20] [--workers 2]

The last line on stdout is one JSON object: {"epochs": [{"rss", "pss",
"samples", "seconds"}, ...], "before": {"rss", "pss"}}.
"""

import argparse
import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python_ops"))
from many_blobs import ManyBlobs  # noqa: E402
from peer_timing import make_logger, tree_memory  # noqa: E402

log = make_logger("dataset_memory_torch")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=500_000)
    p.add_argument("--item-bytes", type=int, default=2048)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()

    from torch.utils.data import DataLoader

    # ManyBlobs' arrays view immutable bytes; collate only reads them (the
    # forked workers inherit this filter).
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

    dataset = ManyBlobs(args.items, args.item_bytes)
    loader = DataLoader(dataset, batch_size=1024, shuffle=True, num_workers=args.workers,
                        persistent_workers=True)
    rss, pss = tree_memory(os.getpid())
    out = {"before": {"rss": rss, "pss": pss}, "epochs": []}
    for epoch in range(args.epochs):
        start, samples = time.perf_counter(), 0
        for blobs, _ in loader:
            samples += len(blobs)
        rss, pss = tree_memory(os.getpid())
        out["epochs"].append({"rss": rss, "pss": pss, "samples": samples,
                              "seconds": round(time.perf_counter() - start, 3)})
        log(f"epoch {epoch + 1}: {samples} samples, PSS {pss / 2**30:.2f} GiB, RSS {rss / 2**30:.2f} GiB")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
