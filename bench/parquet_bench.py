"""W2 read from Parquet against W2 read from its TFRecords: the same CIFAR-10
images and labels, the same ops (pipelines/w2_cifar10.json with only the
source swapped), side by side, interleaved runs, medians.

    .venv/bin/python bench/parquet_bench.py [--data data] [--runs 5] [--epochs 2]

On first use, writes DATA/cifar10-parquet/ from DATA/cifar10/*.tfrecord
(read by sluice, written by pyarrow: "image" fixed_size_binary(3072),
"label" int64, one file per TFRecord file, row groups of 2,048 rows, the
default snappy compression). Prints a table, then one JSON line.
"""

import argparse
import copy
import glob
import json
import os
import statistics
import sys

# numpy (imported by pyarrow) must not spin BLAS threads beside the pipelines.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import sluice  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_rate import rate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
W2 = os.path.join(HERE, "..", "pipelines", "w2_cifar10.json")


def write_parquet(tfrecords, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for path in tfrecords:
        out = os.path.join(out_dir, os.path.basename(path).replace(".tfrecord", ".parquet"))
        if os.path.exists(out):
            continue
        src = sluice.tfrecord(path, {"image": ("bytes", 3072), "label": "int64"}, shuffle_splits=False).batch(4096)
        images, labels = [], []
        for b in src:
            images.append(b["image"].reshape(len(b["label"]), 3072))
            labels.append(b["label"].reshape(-1))
        images, labels = np.concatenate(images), np.concatenate(labels)
        table = pa.table({"image": pa.FixedSizeBinaryArray.from_buffers(pa.binary(3072), len(labels),
                                                                        [None, pa.py_buffer(images.tobytes())]),
                          "label": pa.array(labels, pa.int64())})
        pq.write_table(table, out + ".tmp", row_group_size=2048)
        os.replace(out + ".tmp", out)
        print(f"parquet_bench: wrote {out} ({len(labels):,} rows)", file=sys.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args(argv)
    tfrecords = sorted(glob.glob(os.path.join(args.data, "cifar10", "*.tfrecord")))
    if not tfrecords:
        sys.exit(f"parquet_bench: no {args.data}/cifar10/*.tfrecord; `sluice make-data --out {args.data}` makes them")
    parquet_dir = os.path.join(args.data, "cifar10-parquet")
    write_parquet(tfrecords, parquet_dir)
    with open(W2) as f:
        w2 = json.load(f)
    w2["nodes"][0]["source"]["tfrecord"]["files"] = [os.path.join(args.data, "cifar10", "*.tfrecord")]
    from_parquet = copy.deepcopy(w2)
    from_parquet["nodes"][0]["source"] = {"parquet": {"files": [os.path.join(parquet_dir, "*.parquet")],
                                                      "columns": ["image", "label"]}}
    pipes = {"tfrecord": sluice.Pipeline(w2), "parquet": sluice.Pipeline(from_parquet)}
    got = {k: [] for k in pipes}
    for run in range(1, args.runs + 1):
        for name, pipe in pipes.items():
            got[name].append(rate(pipe, args.epochs)[0])
        print(f"run {run}/{args.runs}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in got.items()) + " samples/s",
              file=sys.stderr)
    med = {k: statistics.median(v) for k, v in got.items()}
    ratios = [pq_ / tf for pq_, tf in zip(got["parquet"], got["tfrecord"])]
    print(f"\nW2 (parse or read, dilation, blur, batch 1024, rescale, flip, rotation, zoom), median of {args.runs} runs")
    print(f"  from TFRecords {med['tfrecord']:10,.0f} samples/s")
    print(f"  from Parquet   {med['parquet']:10,.0f} samples/s  ({med['parquet'] / med['tfrecord']:.1%} of TFRecords; "
          f"per-run ratios {min(ratios):.1%}..{max(ratios):.1%}, median {statistics.median(ratios):.1%})")
    print(json.dumps({"samples_per_s": med, "ratio": med["parquet"] / med["tfrecord"], "run_ratios": ratios,
                      "runs": got}))


if __name__ == "__main__":
    sys.exit(main())
