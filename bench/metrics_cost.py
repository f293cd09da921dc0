"""What serving a process's pipeline metrics costs the pipeline: `sluice run`
with and without `--metrics-port 0`, alternating, on W1 (batched, and
unbatched: one element per sample, the worst case for a cost per element)
and W2. Each run is its own process (serving is for the whole process).

    python bench/metrics_cost.py --data /tmp/bdata --runs 5
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def spec(workload, data, unbatched=False):
    with open(os.path.join(HERE, "..", "pipelines", f"{workload}.json")) as f:
        text = f.read().replace('"data/', json.dumps(data + "/")[:-1])
    nodes = json.loads(text)
    if unbatched:
        nodes["nodes"] = [n for n in nodes["nodes"] if "batch" not in n]
    return nodes


def run(sluice, path, epochs, metrics):
    args = [sluice, "run", path, "--epochs", str(epochs), "--quiet", "--json"]
    if metrics:
        args += ["--metrics-port", "0"]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["samples_per_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="`sluice make-data` output (mnist/, cifar10/)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sluice", default="sluice", help="the sluice command")
    args = parser.parse_args()
    cases = [("W1, batches of 8,192", "w1_mnist", False, 10), ("W1, unbatched", "w1_mnist", True, 5),
             ("W2", "w2_cifar10", False, 3)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, workload, unbatched, epochs in cases:
            path = os.path.join(tmp, f"{workload}{'_unbatched' if unbatched else ''}.json")
            with open(path, "w") as f:
                json.dump(spec(workload, args.data, unbatched), f)
            without, served = [], []
            for i in range(args.runs):
                without.append(run(args.sluice, path, epochs, False))
                served.append(run(args.sluice, path, epochs, True))
                print(f"{name} run {i + 1}: {without[-1]:,.0f} without, {served[-1]:,.0f} served", flush=True)
            a, b = statistics.median(without), statistics.median(served)
            rows.append({"case": name, "without": a, "served": b, "ratio": b / a})
    print("\n| pipeline | samples/s without metrics | served | ratio |\n| --- | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['case']} | {r['without']:,.0f} | {r['served']:,.0f} | {r['ratio']:.3f} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
