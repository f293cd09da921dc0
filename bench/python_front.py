"""What the Python front costs, measured side by side in one run:

1. W1 and W2 through `sluice.torch` against `sluice run` (C++) on the same
   pipeline file, runs interleaved, medians;
2. one `next()` from Python on a trivial pipeline (a tiny in-memory source,
   batch 1) in microseconds per batch, against the same pipeline in C++;
3. the MNIST trainer of examples/train_mnist.py fed by sluice and by the
   torch DataLoader peer: samples/s and the share of step time spent waiting
   for data. Both run under Debian's /usr/bin/python3 (the peer needs its
   torchvision), so both use the same torch.

Run from the checkout, under the project's environment:

    .venv/bin/python bench/python_front.py [--runs 3] [--json]

With --json the last line is one JSON object of all the figures.
"""

import argparse
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import sluice
import sluice.torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {"w1": "pipelines/w1_mnist.json", "w2": "pipelines/w2_cifar10.json"}


def log(msg):
    print(f"python_front: {msg}", file=sys.stderr, flush=True)


def sluice_command():
    found = shutil.which("sluice") or os.path.join(ROOT, "build/src/sluice/cli/sluice")
    if not os.path.exists(found):
        sys.exit("python_front: no `sluice` command (run scripts/python_env.sh)")
    return found


def ensure_data(cli, data):
    wanted = {"mnist": f"{data}/mnist/MNIST/raw/train-images-idx3-ubyte",
              "cifar10": f"{data}/cifar10/*.tfrecord"}
    for name, pattern in wanted.items():
        if not glob.glob(pattern):
            log(f"making {name} data in {data}/{name}")
            subprocess.run([cli, "make-data", name, "--out", f"{data}/{name}"], check=True)


def pipeline_text(workload, data):
    with open(os.path.join(ROOT, WORKLOADS[workload])) as f:
        return f.read().replace('"data/', f'"{data}/')


def run_cpp(cli, path, epochs):
    out = subprocess.run([cli, "run", path, "--epochs", str(epochs), "--json", "--quiet"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_torch(text, epochs):
    """samples/s through sluice.torch, timed as `sluice run` times: from the
    first batch to the last, the first batch not counted."""
    loader = sluice.torch.TorchIterable(sluice.Pipeline.from_json(text))
    start, samples = None, 0
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader:
            if start is None:
                start = time.perf_counter()
            else:
                samples += next(iter(batch.values())).shape[0]
    return samples / (time.perf_counter() - start)


def measure_throughput(cli, workload, data, runs, seconds, tmp):
    text = pipeline_text(workload, data)
    path = os.path.join(tmp, f"{workload}.json")
    with open(path, "w") as f:
        f.write(text)
    one = run_cpp(cli, path, 1)
    epochs = max(2, math.ceil(seconds * one["samples_per_s"] / one["samples"]))
    cpp, py = [], []
    for r in range(runs):
        cpp.append(run_cpp(cli, path, epochs)["samples_per_s"])
        py.append(run_torch(text, epochs))
        log(f"{workload} run {r + 1}/{runs}: sluice run {cpp[-1]:,.0f} samples/s, "
            f"sluice.torch {py[-1]:,.0f} ({epochs} epochs)")
    c, p = statistics.median(cpp), statistics.median(py)
    return {"sluice_run_samples_per_s": c, "sluice_torch_samples_per_s": p, "ratio": p / c,
            "epochs": epochs, "runs_cpp": cpp, "runs_torch": py}


def measure_next_overhead(cli, runs, batches, tmp):
    pipe = sluice.arrays({"x": np.arange(64, dtype=np.float32)}).batch(1).repeat().take(batches)
    path = os.path.join(tmp, "trivial.json")
    with open(path, "w") as f:
        f.write(pipe.to_json())

    def python_loop(make_iter):
        it = make_iter()
        t0 = time.perf_counter()
        n = sum(1 for _ in it)
        return 1e6 * (time.perf_counter() - t0) / n

    numpy_us, torch_us, cpp_us = [], [], []
    for _ in range(runs):
        numpy_us.append(python_loop(lambda: iter(pipe)))
        torch_us.append(python_loop(lambda: iter(sluice.torch.TorchIterable(pipe))))
        cpp_us.append(1e6 / run_cpp(cli, path, 1)["samples_per_s"])
    out = {"numpy_us_per_batch": statistics.median(numpy_us),
           "torch_us_per_batch": statistics.median(torch_us),
           "cpp_us_per_batch": statistics.median(cpp_us), "batches": batches}
    log(f"next(): numpy {out['numpy_us_per_batch']:.2f} us/batch, torch "
        f"{out['torch_us_per_batch']:.2f}, C++ {out['cpp_us_per_batch']:.2f}")
    return out


def measure_training(data, runs, steps, tmp):
    """examples/train_mnist.py under /usr/bin/python3, sluice imported from
    this environment's installed package (nothing else of it on the path)."""
    site = os.path.join(tmp, "site")
    os.makedirs(site, exist_ok=True)
    link = os.path.join(site, "sluice")
    if not os.path.exists(link):
        os.symlink(os.path.dirname(sluice.__file__), link)
    env = dict(os.environ, PYTHONPATH=site)
    results = {"sluice": [], "peer": []}
    for r in range(runs):
        for feeder in ("sluice", "peer"):
            cmd = ["/usr/bin/python3", os.path.join(ROOT, "examples/train_mnist.py"),
                   "--data", f"{data}/mnist", "--steps", str(steps), "--json"]
            if feeder == "peer":
                cmd.append("--peer")
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
            results[feeder].append(json.loads(out.strip().splitlines()[-1]))
            last = results[feeder][-1]
            log(f"train run {r + 1}/{runs} {feeder}: {last['samples_per_s']:,.0f} samples/s, "
                f"waiting {100 * last['wait_share']:.1f}%")
    med = lambda feeder, key: statistics.median(x[key] for x in results[feeder])
    return {"sluice_samples_per_s": med("sluice", "samples_per_s"),
            "sluice_wait_share": med("sluice", "wait_share"),
            "peer_samples_per_s": med("peer", "samples_per_s"),
            "peer_wait_share": med("peer", "wait_share"),
            "steps": steps, "torch": results["sluice"][0]["torch"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data", help="data directory (generated when missing)")
    p.add_argument("--runs", type=int, default=3, help="runs per measurement (median reported)")
    p.add_argument("--seconds", type=float, default=3, help="minimum seconds per throughput run")
    p.add_argument("--next-batches", type=int, default=200000, help="batches per next() run")
    p.add_argument("--train-steps", type=int, default=30, help="timed steps per training run")
    p.add_argument("--no-train", action="store_true", help="skip the training measurement")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = p.parse_args()
    os.chdir(ROOT)
    cli = sluice_command()
    ensure_data(cli, args.data)
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for workload in WORKLOADS:
            result[workload] = measure_throughput(cli, workload, args.data, args.runs,
                                                  args.seconds, tmp)
        result["next"] = measure_next_overhead(cli, args.runs, args.next_batches, tmp)
        if not args.no_train:
            result["train"] = measure_training(args.data, args.runs, args.train_steps, tmp)

    for workload in WORKLOADS:
        w = result[workload]
        print(f"{workload}: sluice.torch {w['sluice_torch_samples_per_s']:,.0f} samples/s vs "
              f"sluice run {w['sluice_run_samples_per_s']:,.0f} -> {100 * w['ratio']:.1f}%")
    n = result["next"]
    print(f"next() on a trivial pipeline: {n['numpy_us_per_batch']:.2f} us/batch (numpy), "
          f"{n['torch_us_per_batch']:.2f} (torch); C++ alone {n['cpp_us_per_batch']:.2f}")
    if "train" in result:
        t = result["train"]
        print(f"training (torch {t['torch']}): sluice {t['sluice_samples_per_s']:,.0f} samples/s, "
              f"waiting {100 * t['sluice_wait_share']:.1f}%; torch DataLoader "
              f"{t['peer_samples_per_s']:,.0f} samples/s, waiting {100 * t['peer_wait_share']:.1f}%")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
