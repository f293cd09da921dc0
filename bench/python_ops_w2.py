"""W2 with its blur as the user's own Python function (cv2.GaussianBlur
in an `ops.python`, everything else native; also as a transform object
holding its sigma, given the image column) against a torch DataLoader
running the same Python transforms with 2 workers.

    .venv/bin/python bench/python_ops_w2.py [--data data] [--runs 5] [--processes 2]

Both run under this interpreter with the same OpenCV (the venv's
opencv-python-headless; `pip install opencv-python-headless` into .venv
first) and hand on NCHW float32 [3, 32, 32] batches of 1,024, the last
partial batch dropped. The peer is bench/peers/w2_opencv.py --blur
gaussian: per sample cv2.dilate, cv2.GaussianBlur and one cv2.warpAffine
for flip, rotation and zoom, parsing the records with protobuf. Both are
timed alike: 2 batches consumed, then 20 timed. Runs interleave; medians.
Also the trainer process's CPU per 1,000 samples (sluice: the engine's
threads in it; its Python pool and the DataLoader's workers are processes
of their own), sluice's W2 all native beside it, and sluice with the whole
pipeline in one local worker process (`distribute(local_workers=1)` at its
end: the trainer only takes the finished batches, through shared memory,
as the DataLoader's main process takes its workers'), in the default
distributed_epoch mode and in parallel_epochs (one worker then runs each
epoch as one pass, with no seams between splits).
Prints a table, then one JSON line.
"""

import json
import os
import statistics
import sys

import sluice
from sluice import ops

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(HERE, "python_ops"))
from side_by_side import arguments, peer_run, sluice_run  # noqa: E402


def w2(data, blur_op, distribute=None):
    """W2 with `blur_op` for its blur (None: the native one); with
    `distribute` (a distribute node's options), the nodes before the batch
    run there."""
    with open(os.path.join(ROOT, "pipelines", "w2_cifar10.json")) as f:
        definition = json.loads(f.read().replace('"data/', f'"{data}/'))
    if blur_op is not None:
        ops_list = definition["nodes"][1]["map"]["ops"]
        ops_list[[o["op"] for o in ops_list].index("gaussian_blur")] = blur_op
    if distribute is not None:
        batch = next(i for i, n in enumerate(definition["nodes"]) if "batch" in n)
        definition["nodes"].insert(batch, {"distribute": distribute})
    return sluice.Pipeline(definition)


def peer(data, workers):
    return peer_run([sys.executable, os.path.join(HERE, "peers", "w2_opencv.py"), "--data", data, "--blur",
                     "gaussian", "--workers", str(workers), "--batches", "20", "--warmup", "2"])


def main():
    args = arguments(__doc__, "holds cifar10/*.tfrecord")
    try:
        import w2_blur
    except ImportError:
        sys.exit("python_ops_w2: no cv2 in this interpreter: .venv/bin/python -m pip install opencv-python-headless")
    data = os.path.join(args.data, "cifar10")
    user_blur = ops.python(w2_blur.blur, inputs="image", processes=args.processes)
    blur_object = ops.python(w2_blur.GaussianBlur(0.8), column="image", processes=args.processes)
    pipes = {"sluice, blur in ops.python": w2(args.data, user_blur),
             "sluice, blur as a transform object": w2(args.data, blur_object),
             "sluice, the same on a local worker": w2(args.data, user_blur, {"local_workers": 1}),
             # One worker runs each epoch whole, in order.
             "sluice, on a local worker, parallel_epochs":
                 w2(args.data, user_blur, {"local_workers": 1, "mode": "parallel_epochs"}),
             "sluice, all native": w2(args.data, None)}
    first = next(iter(pipes["sluice, blur in ops.python"]))
    print(f"sluice hands on {first['image'].dtype}{list(first['image'].shape)}", flush=True)
    for pipe in pipes.values():
        sluice_run(pipe)  # warm-up
    rates = {name: [] for name in [*pipes, "DataLoader, same Python transforms"]}
    cpus = {name: [] for name in rates}
    output = None
    for _ in range(args.runs):
        for name, pipe in pipes.items():
            rate, cpu = sluice_run(pipe)
            rates[name].append(rate)
            cpus[name].append(cpu)
        rate, cpu, output = peer(data, args.workers)
        rates["DataLoader, same Python transforms"].append(rate)
        cpus["DataLoader, same Python transforms"].append(cpu)
    print(f"the DataLoader hands on {output}", flush=True)
    medians = {n: statistics.median(r) for n, r in rates.items()}
    cpu = {n: statistics.median(c) for n, c in cpus.items()}
    for n in rates:
        print(f"{n:>42}: {medians[n]:>9,.0f} samples/s, trainer CPU {cpu[n]:.3f} s per 1,000 samples", flush=True)
    ratio = medians["sluice, blur in ops.python"] / medians["DataLoader, same Python transforms"]
    object_ratio = medians["sluice, blur as a transform object"] / medians["DataLoader, same Python transforms"]
    print(f"sluice with the user's blur / DataLoader: {ratio:.2f}x (as a transform object: {object_ratio:.2f}x)")
    print(json.dumps({"bench": "python_ops_w2", "cores": os.cpu_count(), "processes": args.processes,
                      "workers": args.workers, "samples_per_s": {n: round(v) for n, v in medians.items()},
                      "trainer_cpu_s_per_1k": {n: round(v, 4) for n, v in cpu.items()},
                      "runs": {n: [round(x) for x in r] for n, r in rates.items()}, "ratio": round(ratio, 3),
                      "object_ratio": round(object_ratio, 3)}))


if __name__ == "__main__":
    main()
