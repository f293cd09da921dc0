"""W5b, ImageNet-style JPEGs with RandAugment (pipelines/w5b_imagenet.json):
random-resized-crop 224, horizontal flip, RandAugment(2, 9), normalize,
batch 256. sluice against a
torch DataLoader with torchvision's RandAugment (2 workers) and DALI's CPU
pipeline with its auto_aug.rand_augment, side by side, interleaved runs,
medians. All three use torchvision's RandAugment settings: nearest
interpolation, fill 0, shifts up to 150/331 of the side.

    .venv/bin/python bench/w5b_bench.py [--data data] [--runs 3] [--epochs 2]

DATA/imagenet is W3's image folder (`sluice-bench w3` or the demo makes
it); the DALI peer's venv is made on first use
(bench/peers/ensure_dali_venv.sh). Prints a table, then one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

import sluice

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_rate import rate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "peers")


def w5b(folder):
    """pipelines/w5b_imagenet.json, reading `folder`."""
    with open(os.path.join(HERE, "..", "pipelines", "w5b_imagenet.json")) as f:
        spec = json.load(f)
    spec["nodes"][0]["source"]["image_folder"]["root"] = folder
    return sluice.Pipeline.from_json(json.dumps(spec))


def peer(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--peer-batches", type=int, default=4)
    args = p.parse_args(argv)
    folder = os.path.join(args.data, "imagenet")
    if not os.path.isdir(folder):
        sys.exit(f"w5b_bench: {folder} is missing; `sluice-bench w3 --data {args.data}` makes it")
    threads = os.cpu_count()
    dali_py = subprocess.run([os.path.join(PEERS, "ensure_dali_venv.sh")], check=True, capture_output=True,
                             text=True).stdout.strip().splitlines()[-1]
    batches = ["--batches", str(args.peer_batches)]
    torch_cmd = ["/usr/bin/python3", os.path.join(PEERS, "w3_torch.py"), "--data", folder, "--rand-augment",
                 *batches]
    dali_cmd = [dali_py, os.path.join(PEERS, "w3_dali.py"), "--data", folder, "--rand-augment", "--threads",
                str(threads), *batches]
    pipe = w5b(folder)
    got = {"sluice": [], "torchvision": [], "dali": []}
    outputs = {}
    for run in range(1, args.runs + 1):
        r, outputs["sluice"] = rate(pipe, args.epochs)
        got["sluice"].append(r)
        for name, cmd in (("torchvision", torch_cmd), ("dali", dali_cmd)):
            result = peer(cmd)
            got[name].append(result["samples_per_s"])
            outputs[name] = result["output"]
        print(f"run {run}/{args.runs}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in got.items()) + " samples/s",
              file=sys.stderr)
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"\nW5b (decode + random-resized-crop 224 + flip + rand_augment(2, 9) + normalize, batch 256), "
          f"median of {args.runs} runs, {threads} cores")
    print(f"  sluice                       {med['sluice']:8,.0f} samples/s")
    print(f"  torchvision DataLoader (2 w.) {med['torchvision']:7,.0f} samples/s  "
          f"(sluice: {med['sluice'] / med['torchvision']:.2f}x)")
    print(f"  DALI CPU pipeline             {med['dali']:7,.0f} samples/s  (sluice: {med['sluice'] / med['dali']:.2f}x)")
    print("  outputs per sample: " + "; ".join(f"{k} {v}" for k, v in outputs.items()))
    print(json.dumps({"samples_per_s": med, "ratio_torchvision": med["sluice"] / med["torchvision"],
                      "ratio_dali": med["sluice"] / med["dali"], "outputs": outputs, "runs": got}))


if __name__ == "__main__":
    sys.exit(main())
