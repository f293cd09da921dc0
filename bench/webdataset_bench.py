"""W3 read from WebDataset shards against W3 read from image folders (the
same JPEGs, the same ops), and against the webdataset library's loader with
torchvision's transforms, side by side, interleaved runs, medians.

    .venv/bin/python bench/webdataset_bench.py [--data data] [--runs 3] [--epochs 3]

Makes the shards from DATA/imagenet into DATA/imagenet-shards on first use
(bench/peers/make_shards.py) and the webdataset peer's venv
(bench/peers/ensure_wds_venv.sh). Prints a table, then one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

import sluice
from sluice import ops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_rate import rate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "peers")


def w3(source):
    return (source.map(ops.decode_random_resized_crop(size=[224]), ops.crop_mirror_normalize(mirror=0.5))
            .batch(256, drop_remainder=True).prefetch())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args(argv)
    folder, shards = os.path.join(args.data, "imagenet"), os.path.join(args.data, "imagenet-shards")
    subprocess.run(["/usr/bin/python3", os.path.join(PEERS, "make_shards.py"), "--data", folder, "--out", shards],
                   check=True)
    peer_py = subprocess.run([os.path.join(PEERS, "ensure_wds_venv.sh")], check=True, capture_output=True,
                             text=True).stdout.strip().splitlines()[-1]
    from_folder = w3(sluice.image_folder(folder))
    from_shards = w3(sluice.webdataset(os.path.join(shards, "*.tar")))
    got = {"folder": [], "shards": [], "webdataset": []}
    outputs = {}
    for run in range(1, args.runs + 1):
        got["folder"].append(rate(from_folder, args.epochs)[0])
        r, outputs["sluice"] = rate(from_shards, args.epochs)
        got["shards"].append(r)
        peer = subprocess.run([peer_py, os.path.join(PEERS, "w3_webdataset.py"), "--data", shards, "--batches", "8"],
                              check=True, capture_output=True, text=True)
        result = json.loads(peer.stdout.strip().splitlines()[-1])
        got["webdataset"].append(result["samples_per_s"])
        outputs["webdataset"] = result["output"]
        print(f"run {run}/{args.runs}: folder {got['folder'][-1]:,.0f}, shards {got['shards'][-1]:,.0f}, "
              f"webdataset {got['webdataset'][-1]:,.0f} samples/s", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"\nW3 (decode + random-resized-crop 224 + flip + normalize, batch 256), median of {args.runs} runs")
    print(f"  sluice, image folders     {med['folder']:10,.0f} samples/s")
    print(f"  sluice, WebDataset shards {med['shards']:10,.0f} samples/s  ({med['shards'] / med['folder']:.1%} of folders)")
    print(f"  webdataset library (2 w.) {med['webdataset']:10,.0f} samples/s  (sluice: {med['shards'] / med['webdataset']:.2f}x)")
    print(f"  outputs per sample: sluice {outputs['sluice']}; webdataset {outputs['webdataset']}")
    print(json.dumps({"folder_samples_per_s": med["folder"], "shards_samples_per_s": med["shards"],
                      "webdataset_samples_per_s": med["webdataset"], "shards_vs_folder": med["shards"] / med["folder"],
                      "ratio_webdataset": med["shards"] / med["webdataset"], "outputs": outputs, "runs": got}))


if __name__ == "__main__":
    sys.exit(main())
