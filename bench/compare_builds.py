"""Two builds of sluice side by side on the reference workloads: W1, W2,
W5a, W3, and W2 and W3 with their prefix on the embedded service (one local
worker; `--workloads w3_service` to add W3's), each
pipeline run by both `sluice` commands in turn, `--runs` times, the order
alternating. Prints the median samples/s of each and the median of the
per-run ratios new/old.

Each build may run under its own environment (e.g. SLUICE_SIMD=avx2 to run
the new build's kernels at the AVX2 target):

    python3 bench/compare_builds.py --old /tmp/old/build/src/sluice/cli/sluice \\
        --new build/src/sluice/cli/sluice [--new-env SLUICE_SIMD=avx2] [--runs 5] [--json]

Data is made under --data (default data/) on first use, as the pipelines
in pipelines/ expect it. Run from the checkout.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# workload: (pipeline file, epochs per run)
WORKLOADS = {
    "w1": ("pipelines/w1_mnist.json", 30),
    "w2": ("pipelines/w2_cifar10.json", 8),
    "w3": ("pipelines/w3_imagenet.json", 3),
    "w5a": ("pipelines/w5a_cifar10.json", 30),
    "service": ("pipelines/w2_service.json", 3),
    "w3_service": ("pipelines/w3_service.json", 3),
}
DATA = {"mnist": "mnist/MNIST/raw/train-images-idx3-ubyte", "cifar10": "cifar10/*.tfrecord",
        "imagenet": "imagenet/*/*"}


def log(msg):
    print(f"compare_builds: {msg}", file=sys.stderr, flush=True)


def parse_env(items):
    env = dict(os.environ)
    for item in items or []:
        key, _, value = item.partition("=")
        env[key] = value
    return env


def ensure_data(cli, data):
    for name, pattern in DATA.items():
        if not glob.glob(os.path.join(data, pattern)):
            log(f"making {name} data in {data}/{name}")
            subprocess.run([cli, "make-data", name, "--out", os.path.join(data, name)], check=True,
                           stdout=subprocess.DEVNULL)


def run(cli, env, pipeline, epochs, cwd):
    out = subprocess.run([cli, "run", pipeline, "--epochs", str(epochs), "--json", "--quiet"], env=env, cwd=cwd,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old", required=True, help="the baseline's sluice command")
    p.add_argument("--new", required=True, help="the candidate's sluice command")
    p.add_argument("--old-env", action="append", help="KEY=VALUE for the old build's runs (repeatable)")
    p.add_argument("--new-env", action="append", help="KEY=VALUE for the new build's runs (repeatable)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--workloads", default="w1,w2,w5a,w3,service")
    p.add_argument("--data", default="data", help="where the datasets are (relative to the checkout)")
    p.add_argument("--json", action="store_true", help="print one JSON object last")
    args = p.parse_args()

    builds = {"old": (os.path.abspath(args.old), parse_env(args.old_env)),
              "new": (os.path.abspath(args.new), parse_env(args.new_env))}
    ensure_data(builds["new"][0], os.path.join(ROOT, args.data))
    results = {}
    for name in args.workloads.split(","):
        pipeline, epochs = WORKLOADS[name]
        rates = {"old": [], "new": []}
        simd = {}
        for i in range(args.runs):
            order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
            for build in order:
                cli, env = builds[build]
                r = run(cli, env, pipeline, epochs, ROOT)
                rates[build].append(r["samples_per_s"])
                simd[build] = r.get("simd", "build flags")
            log(f"{name} run {i + 1}/{args.runs}: old {rates['old'][-1]:,.0f}, new {rates['new'][-1]:,.0f} samples/s")
        ratios = [n / o for n, o in zip(rates["new"], rates["old"])]
        results[name] = {"old": statistics.median(rates["old"]), "new": statistics.median(rates["new"]),
                         "ratio": statistics.median(ratios), "ratios": ratios, "simd": simd}
        print(f"{name:8s} old {results[name]['old']:>12,.0f}  new {results[name]['new']:>12,.0f} samples/s  "
              f"new/old {results[name]['ratio']:.3f} (runs {', '.join(f'{r:.3f}' for r in ratios)}; "
              f"new on {simd['new']})", flush=True)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
