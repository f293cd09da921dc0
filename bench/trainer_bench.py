"""The loader beside a trainer that needs the CPU too: what each way of
loading costs the training step, and what the job gets.

Two kinds of trainer, each at a light and a heavy load, run in the
loader's process on CPU torch with one thread:

- "model": a small convolutional net trained on each batch (forward,
  backward, SGD);
- "launcher": a thread waking every 300 us to run a small op, as the thread
  of a GPU trainer that launches kernels does; a step is 100 wake-ups.

For W1, W2, W3 and W5b it runs sluice in the process (on every core, and
on one thread), sluice through a local worker process (the shared-memory
rings of `distribute()`), sluice with placement "auto", and the expert
DataLoader (bench/peers, 2 workers), and with the deterministic prefix
materialized beforehand where the workload has one (W2), each alone (the loader's own rate)
and under each trainer load, beside the trainer with its data ready (one
batch made ahead: loading free). It reports the trainer's median step
time (its compute, not its wait for data), the job's steps/s and
samples/s.

    .venv/bin/python bench/trainer_bench.py --data DATA [--runs 3] [--steps 40] [--warmup 12]
        [--workloads w1_mnist,w2_cifar10,w3_imagenet,w5b_imagenet]
        [--loaders "data ready,sluice,sluice local worker,expert DataLoader"]

DATA holds mnist/MNIST/raw (`sluice make-data mnist`), cifar10/*.tfrecord
(`sluice make-data cifar10`) and imagenet/ (`sluice make-data imagenet`).
W3's expert DataLoader is bench/peers/w3_opencv.py (OpenCV, as torchvision
is not in .venv). W5b's is torchvision's RandAugment (bench/peers/w3_torch.py),
which only Debian's /usr/bin/python3 has here: with w5b_imagenet the bench
runs itself again there, with sluice (and nothing else) from .venv on its
path, so its trainer runs on Debian's torch. Prints a table, then one JSON
line.
"""

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

import sluice

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))

# (kind, size, hidden): a model on the batch pooled to size x size with
# `hidden` channels and units; a launcher's op on a size x size tensor.
LOADS = {"none": None, "model light": ("model", 8, 16), "model heavy": ("model", 16, 32),
         "launcher light": ("launcher", 64, 0), "launcher heavy": ("launcher", 512, 0)}
# "data ready": one batch made ahead, handed again and again: the trainer's
# step with loading free.
# The sluice loaders: the hand-chosen placements a sweep tries (the
# default, one thread in the trainer's process, a local worker process, the
# deterministic prefix materialized beforehand where there is one) and
# placement "auto".
SLUICE_LOADERS = {"sluice": {}, "sluice 1 thread": {"threads": 1}, "sluice local worker": {"local_worker": True},
                  "sluice materialized": {"materialized": True}, "sluice auto": {"auto": True}}
LOADERS = ("data ready", *SLUICE_LOADERS, "expert DataLoader")


def sluice_pipeline(workload, data, local_worker=False, threads=0, auto=False, materialized=False, service=None):
    with open(os.path.join(HERE, "..", "pipelines", f"{workload}.json")) as f:
        text = f.read().replace('"data/', json.dumps(data + "/")[:-1])
    spec = json.loads(text)
    if local_worker:  # the maps before the batch on a worker process; rows come back through its ring
        batch = next(i for i, n in enumerate(spec["nodes"]) if "batch" in n)
        spec["nodes"].insert(batch, {"distribute": {"local_workers": 1}})
    options = spec.setdefault("options", {})
    if threads:
        options["threads"] = threads
    if auto:
        options["placement"] = "auto"
    if service:  # a dispatcher placement "auto" may move the front to
        options["placement_service"] = {"dispatcher": service}
    pipe = sluice.Pipeline.from_json(json.dumps(spec))
    # Written before the run, as by hand; not timed.
    return pipe.materialize(tempfile.mkdtemp(prefix="sluice-bench-prefix-")) if materialized else pipe


def sluice_batches(pipe):
    while True:
        for b in pipe:
            yield torch.from_numpy(b["image"]), torch.from_numpy(b["label"])


def expert_batches(workload, data):
    from torch.utils.data import DataLoader
    if workload == "w1_mnist":
        import w1_expert
        raw = os.path.join(data, "mnist", "MNIST", "raw")
        images = w1_expert.read_idx(os.path.join(raw, "train-images-idx3-ubyte"), 3)
        labels = w1_expert.read_idx(os.path.join(raw, "train-labels-idx1-ubyte"), 1)
        from torch.utils.data import BatchSampler, SequentialSampler
        sampler = BatchSampler(SequentialSampler(range(len(images))), 8192, drop_last=True)
        loader = DataLoader(w1_expert.Batches(images, labels, "cv2"), sampler=sampler, batch_size=None,
                            num_workers=2, persistent_workers=True, worker_init_fn=w1_expert.worker_init)
    elif workload == "w3_imagenet":
        import w3_opencv
        loader = w3_opencv.make_loader(os.path.join(data, "imagenet"), 256, 2)
    elif workload == "w5b_imagenet":
        import w3_torch
        loader = w3_torch.make_loader(os.path.join(data, "imagenet"), 256, 2, rand_augment=True)
    else:
        import w2_opencv
        import w2_torch
        files = sorted(glob.glob(os.path.join(data, "cifar10", "*.tfrecord")))
        loader = DataLoader(w2_opencv.build_dataset(files, w2_torch.load_example_pb2(), 1024), batch_size=None,
                            num_workers=2, persistent_workers=True, worker_init_fn=w2_opencv.worker_init)
    while True:
        yield from loader


class ModelTrainer:
    """A small conv net on the batch pooled to `size` x `size`, with
    `hidden` channels and units, trained on each batch."""

    def __init__(self, in_channels, size, hidden):
        nn = torch.nn
        self.net = nn.Sequential(nn.AdaptiveAvgPool2d(size), nn.Conv2d(in_channels, hidden, 3, padding=1),
                                 nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(hidden * 16, hidden),
                                 nn.ReLU(), nn.Linear(hidden, 10))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01)

    def step(self, x, y):
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.net(x), y % 10)
        loss.backward()
        self.opt.step()


class LauncherTrainer:
    """100 wake-ups 300 us apart, each an op on a `size` x `size` tensor."""

    def __init__(self, size):
        self.a = torch.rand(size, size)

    def step(self, x, y):
        for _ in range(100):
            time.sleep(0.0003)
            self.a.mul_(0.5).add_(1.0)


def trainer_of(load, in_channels):
    kind, a, b = LOADS[load]
    return ModelTrainer(in_channels, a, b) if kind == "model" else LauncherTrainer(a)


def deciding(pipe):
    """placement "auto" is trying a move, or a move waits for the epoch's end."""
    report = pipe.placement()
    return report["judging"] or report["running"] != report["placement"]


def measure(batches, trainer, steps, warmup=3, warmup_s=0.0, pending=lambda: False):
    """(median trainer step in ms, steps/s, samples/s) over `steps` steps,
    after `warmup` steps and at least `warmup_s` seconds of them, and
    while `pending()` holds, up to 4 x `warmup_s`."""
    start = time.perf_counter()
    done = 0
    while done < warmup or time.perf_counter() - start < warmup_s or (
            pending() and time.perf_counter() - start < 4 * warmup_s):
        x, y = next(batches)
        if trainer is not None:
            trainer.step(x, y)
        done += 1
    compute, samples = [], 0
    start = time.perf_counter()
    for _ in range(steps):
        x, y = next(batches)
        samples += int(y.shape[0])
        if trainer is not None:
            t = time.perf_counter()
            trainer.step(x, y)
            compute.append(time.perf_counter() - t)
    seconds = time.perf_counter() - start
    return (statistics.median(compute) * 1e3 if compute else 0.0), steps / seconds, samples / seconds


def rerun_under_debian_python(argv):
    """Runs this bench again under Debian's python3 (torchvision), with only
    this environment's sluice on its path: .venv's torch and numpy would
    not load there."""
    path = tempfile.mkdtemp(prefix="sluice-only-")
    os.symlink(os.path.dirname(sluice.__file__), os.path.join(path, "sluice"))
    env = dict(os.environ, PYTHONPATH=path)
    os.execve("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__), *argv], env)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--workloads", default="w1_mnist,w2_cifar10")
    p.add_argument("--loaders", default=",".join(LOADERS), help="a comma-separated subset of: " + ", ".join(LOADERS))
    p.add_argument("--warmup", type=float, default=12.0,
                   help="seconds each loader runs under each trainer load before it is measured; placement auto "
                        "runs on while a move is being judged (up to 4x: it rates a placement on two windows of 2 s "
                        "or 8 batches, after one of start-up)")
    args = p.parse_args(argv)
    loaders = args.loaders.split(",")
    if not set(loaders) <= set(LOADERS):
        p.error(f"--loaders: unknown {', '.join(sorted(set(loaders) - set(LOADERS)))}")
    if "w5b_imagenet" in args.workloads.split(","):
        try:
            import torchvision  # noqa: F401
        except ImportError:
            rerun_under_debian_python(argv)
    torch.set_num_threads(1)
    results = {}
    for workload in args.workloads.split(","):
        in_channels = 1 if workload == "w1_mnist" else 3
        for loader in loaders:
            print(f"{workload}, {loader} ...", file=sys.stderr, flush=True)
            if loader == "data ready":
                batch = next(sluice_batches(sluice_pipeline(workload, args.data, False)))
                batches = iter(lambda: batch, None)
            elif loader == "expert DataLoader":
                batches = expert_batches(workload, args.data)
            else:
                try:
                    pipe = sluice_pipeline(workload, args.data, **SLUICE_LOADERS[loader])
                except Exception as e:  # no deterministic prefix to materialize
                    print(f"  skipped: {e}", file=sys.stderr, flush=True)
                    continue
                batches = sluice_batches(pipe)
            # Every loader warms up as long under each load (sluice's
            # autotuner settles meanwhile); placement auto on until the
            # move it tries is judged.
            warmup_s = args.warmup if loader != "data ready" else 0.0
            decided = 0
            for load in LOADS:
                trainer = None if LOADS[load] is None else trainer_of(load, in_channels)
                # placement auto warms up until the move it tries is judged.
                pending = (lambda: deciding(pipe)) if loader == "sluice auto" else (lambda: False)
                runs = [measure(batches, trainer, args.steps, warmup_s=warmup_s if run == 0 else 0.0,
                                pending=pending) for run in range(args.runs)]
                if loader == "sluice auto":  # where it ran, and what it decided under this load
                    placement = pipe.placement()
                    print(f"  {load}: {placement['placement']['description']}", file=sys.stderr, flush=True)
                    for line in placement["decisions"][decided:]:
                        print(f"    {line}", file=sys.stderr, flush=True)
                    decided = len(placement["decisions"])
                results[f"{workload} | {loader} | {load}"] = [statistics.median(r[i] for r in runs) for i in range(3)]
            del batches
    print(f"{'workload | loader | trainer load':<52} {'step ms':>8} {'steps/s':>8} {'samples/s':>11}")
    for name, (step_ms, steps_s, samples_s) in results.items():
        print(f"{name:<52} {step_ms:>8.2f} {steps_s:>8.2f} {samples_s:>11,.0f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
