"""sluice.from_dataset over a Dataset whose __getitem__ decodes a JPEG with
PIL, then sluice's native random-resized crop, flip and normalize, against
a torch DataLoader doing the whole thing in Python (torchvision's
ImageFolder, which decodes with PIL the same way, RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor, Normalize: bench/peers/w3_torch.py), 2
worker processes each.

    .venv/bin/python bench/python_dataset_pil.py [--data data] [--runs 5] [--processes 2]

Both hand on float32 [3, 224, 224] batches of 256, the last partial batch
dropped, from the same JPEGs (data/imagenet, `sluice make-data imagenet`).
sluice's processes run this interpreter's PIL (`pip install pillow==9.4.0`
into .venv first: the version Debian's python3-pil has, which the peer
runs under /usr/bin/python3). Runs interleave; medians; also each side's
trainer-process CPU per 1,000 images. Prints a table, then one JSON line.
"""

import json
import os
import statistics
import sys

import sluice
from sluice import ops

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "python_ops"))
from side_by_side import arguments, peer_run, sluice_run  # noqa: E402

PEER = "DataLoader, all in Python"
OURS = "sluice.from_dataset + native crop"


def peer(data, workers, batches):
    return peer_run(["/usr/bin/python3", os.path.join(HERE, "peers", "w3_torch.py"), "--data", data,
                     "--workers", str(workers), "--batches", str(batches), "--warmup", "1"])


def main():
    args = arguments(__doc__, "holds imagenet/ (class folders)")
    try:
        from pil_photos import PilPhotos
    except ImportError:
        sys.exit("python_dataset_pil: no PIL in this interpreter: .venv/bin/python -m pip install pillow==9.4.0")
    data = os.path.join(args.data, "imagenet")
    dataset = PilPhotos(data)
    pipe = (sluice.from_dataset(dataset, names=("image", "label"), images=("image",), processes=args.processes)
            .map(ops.decode_random_resized_crop(size=[224]), ops.crop_mirror_normalize(mirror=0.5))
            .batch(256, drop_remainder=True))
    first = next(iter(pipe))
    print(f"{len(dataset)} JPEGs; sluice hands on {first['image'].dtype}{list(first['image'].shape[1:])} x "
          f"{first['image'].shape[0]}", flush=True)
    batches = len(dataset) // 256
    sluice_run(pipe)  # warm-up
    rates, cpus, output = {OURS: [], PEER: []}, {OURS: [], PEER: []}, None
    for _ in range(args.runs):
        rate, cpu = sluice_run(pipe, warmup=1, batches=batches)  # timed as the peer times itself
        rates[OURS].append(rate)
        cpus[OURS].append(cpu)
        rate, cpu, output = peer(data, args.workers, batches)
        rates[PEER].append(rate)
        cpus[PEER].append(cpu)
    print(f"the DataLoader hands on {output} x 256", flush=True)
    medians = {n: statistics.median(r) for n, r in rates.items()}
    cpu = {n: statistics.median(c) for n, c in cpus.items()}
    for n in rates:
        print(f"{n:>34}: {medians[n]:>7,.0f} images/s, trainer CPU {cpu[n]:.3f} s per 1,000 images", flush=True)
    ratio = medians[OURS] / medians[PEER]
    print(f"sluice.from_dataset / DataLoader: {ratio:.2f}x")
    print(json.dumps({"bench": "python_dataset_pil", "cores": os.cpu_count(), "processes": args.processes,
                      "workers": args.workers, "images_per_s": {n: round(v) for n, v in medians.items()},
                      "trainer_cpu_s_per_1k": {n: round(v, 4) for n, v in cpu.items()},
                      "runs": {n: [round(x) for x in r] for n, r in rates.items()}, "ratio": round(ratio, 3)}))


if __name__ == "__main__":
    main()
