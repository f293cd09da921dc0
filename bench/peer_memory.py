"""Memory of sluice and the peers on W3 and W2, side by side: the peak of
the proportional set size (PSS) of the whole process tree (a DataLoader's
workers included, shared pages counted once), sampled every 100 ms, at
equal outputs (NCHW float32 batches of 256 for W3, 1024 for W2).

    .venv/bin/python bench/peer_memory.py --data data [--runs 3] [--batches 14]

Each loader runs in a fresh process tree for `--batches` batches after its
warm-up: sluice in-process at its default budget (a Python loop, as a
trainer iterates it), the torch DataLoader peers with 2 workers (torchvision
for W3, the expert OpenCV loader for W2) under Debian's /usr/bin/python3,
and DALI's CPU pipeline (W3) in its venv (bench/peers/ensure_dali_venv.sh).
Prints a table, then one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = os.path.join(HERE, "peers")

SLUICE_LOOP = """
import json, sys, sluice
text = open(sys.argv[1]).read().replace('"data/', '"' + sys.argv[2] + '/')
pipe = sluice.Pipeline.from_json(text)
n, batches = 0, int(sys.argv[3])
while n < batches:
    for b in pipe:
        n += 1
        if n == batches:
            break
print(json.dumps({"batches": n, "memory": pipe.memory()}))
"""


def tree(pid):
    """`pid` and its descendants."""
    out, frontier = [pid], [pid]
    while frontier:
        children = []
        for p in frontier:
            try:
                with open(f"/proc/{p}/task/{p}/children") as f:
                    children += [int(c) for c in f.read().split()]
            except OSError:
                pass
        out += children
        frontier = children
    return out


def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def peak_pss(cmd):
    """Runs `cmd`; the peak PSS of its process tree and its last stdout line."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, sum(pss(p) for p in tree(proc.pid)))
        time.sleep(0.1)
    out = proc.stdout.read()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} {cmd[1]} failed with status {proc.returncode}")
    return peak, out.strip().splitlines()[-1]


def loaders(args):
    dali = subprocess.run(["bash", os.path.join(PEERS, "ensure_dali_venv.sh")], check=True,
                          capture_output=True, text=True).stdout.strip()
    imagenet, cifar = os.path.join(args.data, "imagenet"), os.path.join(args.data, "cifar10")
    timed = ["--batches", str(args.batches), "--warmup", "1"]
    return [
        ("W3", "sluice", [sys.executable, "-c", SLUICE_LOOP, os.path.join(ROOT, "pipelines", "w3_imagenet.json"),
                          args.data, str(args.batches + 1)]),
        ("W3", "DataLoader + torchvision", ["/usr/bin/python3", os.path.join(PEERS, "w3_torch.py"),
                                            "--data", imagenet, "--workers", "2", *timed]),
        ("W3", "DALI CPU", [dali, os.path.join(PEERS, "w3_dali.py"), "--data", imagenet, *timed]),
        ("W2", "sluice", [sys.executable, "-c", SLUICE_LOOP, os.path.join(ROOT, "pipelines", "w2_cifar10.json"),
                          args.data, str(args.batches + 1)]),
        ("W2", "DataLoader + OpenCV", ["/usr/bin/python3", os.path.join(PEERS, "w2_opencv.py"), "--data", cifar,
                                       "--workers", "2", *timed]),
    ]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batches", type=int, default=14)
    args = p.parse_args(argv)
    runs = {}
    for i in range(args.runs):
        print(f"run {i + 1}/{args.runs}", file=sys.stderr, flush=True)
        for workload, name, cmd in loaders(args):
            peak, _ = peak_pss(cmd)
            runs.setdefault((workload, name), []).append(peak / 1e6)
    rows = [{"workload": w, "loader": n, "peak_pss_mb": statistics.median(v), "runs_mb": v}
            for (w, n), v in runs.items()]
    print(f"{'workload':<8} {'loader':<26} {'peak PSS MB':>12}")
    for r in rows:
        print(f"{r['workload']:<8} {r['loader']:<26} {r['peak_pss_mb']:>12.1f}")
    print(json.dumps(rows))


main()
