#!/usr/bin/env python3
"""End to end on a GPU: W1, W2 and W3 into a torch consumer on CUDA.

Three contenders per workload, run interleaved, medians of --runs:
  sluice_cpu  the whole pipeline on the CPU (as `sluice-bench w1|w2|w3`),
              each float32 batch then copied to the GPU;
  sluice_gpu  read, parse and decode on the CPU; the tail in a map on device
              "cuda": uint8 crosses PCIe, torch gets CUDA tensors (DLPack);
  torch_gpu   the user's usual alternative: a torch DataLoader decoding on
              the CPU in worker processes (pin_memory), the tail in
              torchvision.transforms.v2 on the CUDA batch.
Workload w3_nvjpeg is W3 with the JPEGs decoded on the GPU: sluice_gpu
batches the files' bytes and decodes them in the map on device "cuda"
(nvJPEG, the hardware engines where the GPU has them); torch_gpu is
torchvision's batched decode_jpeg(device="cuda") with the v2 transforms on
the GPU; sluice_cpu is W3 all on the CPU. Its result also says where sluice
decoded the images (device_decode_stats); SLUICE_NVJPEG_HARDWARE=0 keeps
sluice off the hardware engines.
Equal outputs: the same shapes and dtypes, float32 on the GPU (W1 [B,28,28],
W2 [B,32,32,3] for sluice and [B,3,32,32] for torchvision, W3 [B,3,224,224]).
torchvision's batched transforms draw one set of random parameters per
batch, sluice one per sample.

Reports samples/s and the trainer's CPU seconds per 1M samples (this process
and its worker processes). Needs torch with CUDA, torchvision, psutil and the
sluice module. Usage:
    python3 bench/peers/gpu_end_to_end.py --data DIR [--runs 3] [--batches 30]
DIR holds mnist/, cifar10/ and imagenet/ as `sluice-bench gpu` writes them.
The last line on stdout is one JSON object.
"""

import argparse
import glob
import json
import os
import statistics
import struct
import sys
import time

import numpy as np
import psutil
import torch
import torch.nn.functional as F
import torchvision
from torchvision.transforms import v2

import sluice
import sluice.torch
from sluice import ops


def log(*args):
    print("gpu_end_to_end:", *args, file=sys.stderr, flush=True)


def cpu_seconds():
    """User + system seconds of this process and its live children."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def timed(batches, count, warmup=3):
    """samples/s and CPU seconds per 1M samples over `count` batches of an endless iterator."""
    it = iter(batches)
    for _ in range(warmup):
        next(it)
    torch.cuda.synchronize()
    start, cpu0, samples = time.perf_counter(), cpu_seconds(), 0
    for _ in range(count):
        b = next(it)
        b.float().sum()  # the consumer touches the batch on its stream
        samples += b.shape[0]
    torch.cuda.synchronize()
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu0
    return samples / seconds, cpu / samples * 1e6


# --- sluice -----------------------------------------------------------------

def sluice_batches(pipe):
    while True:
        for batch in sluice.torch.TorchIterable(pipe):
            yield batch["image"].cuda(non_blocking=True)


W2_FEATURES = {"image": ("bytes", 3072), "label": "int64"}
W2_AUG = [ops.random_flip(mode="horizontal"), ops.random_rotation(degrees=36.0, fill_mode="reflect"),
          ops.random_zoom(scale=[0.9, 1.1], fill_mode="reflect")]


def sluice_pipeline(workload, data, gpu):
    dev = "cuda" if gpu else "cpu"
    if workload == "w1":
        p = sluice.mnist(f"{data}/mnist/MNIST/raw/train-images-idx3-ubyte",
                         f"{data}/mnist/MNIST/raw/train-labels-idx1-ubyte").repeat()
        tail = [ops.normalize(mean=[0.1307], std=[0.3081], scale=1 / 255),
                ops.gaussian_blur(ksize=11, sigma=[0.1, 2.0])]
        return (p.batch(8192, True).map(*tail, device=dev) if gpu else p.map(*tail).batch(8192, True)).prefetch()
    if workload == "w2":
        # With its tail on the GPU W2 is bound by reading: its eight files
        # are read at once (the same rows, in the same order). All on the CPU
        # it is bound by its ops, and one reader is its fastest.
        p = sluice.tfrecord(f"{data}/cifar10/*.tfrecord", W2_FEATURES, parallel_reads=8 if gpu else 1).repeat()
        p = p.map(ops.decode_raw(dtype="uint8"), ops.reshape(shape=[32, 32, 3]))
        front = [ops.grey_dilation(size=3), ops.gaussian_blur(ksize=11, sigma=[0.8])]
        tail = [ops.rescale(scale=1 / 255)] + W2_AUG
        if gpu:
            return p.batch(1024, True).map(*front, *tail, device="cuda").prefetch()
        return p.map(*front).batch(1024, True).map(*tail).prefetch()
    cmn = ops.crop_mirror_normalize(mirror=0.5)
    rrc = ops.decode_random_resized_crop(size=[224])
    p = sluice.image_folder(f"{data}/imagenet").repeat()
    if workload == "w3_nvjpeg" and gpu:  # the JPEG bytes batched, decoded on the GPU
        return p.batch(256, True).map(rrc, cmn, device="cuda").prefetch()
    p = p.map(rrc)
    return (p.batch(256, True).map(cmn, device="cuda") if gpu else p.map(cmn).batch(256, True)).prefetch()


# --- torch DataLoader + torchvision v2 on the GPU ---------------------------

class Mnist(torch.utils.data.Dataset):
    def __init__(self, data):
        with open(f"{data}/mnist/MNIST/raw/train-images-idx3-ubyte", "rb") as f:
            n, h, w = struct.unpack(">3I", f.read(16)[4:])
            self.images = np.frombuffer(f.read(), np.uint8).reshape(n, h, w)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return torch.from_numpy(self.images[i].copy())


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def fields(buf):
    """(field number, bytes) of a protobuf message's length-delimited fields."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        if key & 7 == 2:
            n, pos = varint(buf, pos)
            yield key >> 3, buf[pos:pos + n]
            pos += n
        elif key & 7 == 0:
            _, pos = varint(buf, pos)
        else:
            raise ValueError(f"wire type {key & 7} in a tf.train.Example")


def example_image(record):
    """The 'image' bytes of a tf.train.Example (Features.feature map entry)."""
    for _, features in fields(record):
        for _, entry in fields(features):
            kv = dict(fields(entry))
            if kv.get(1) == b"image":
                bytes_list = dict(fields(kv[2]))[1]
                return dict(fields(bytes_list))[1]
    raise ValueError("no image feature")


class Cifar(torch.utils.data.Dataset):
    def __init__(self, data):
        self.records = []
        for path in sorted(glob.glob(f"{data}/cifar10/*.tfrecord")):
            with open(path, "rb") as f:
                buf = f.read()
            pos = 0
            while pos < len(buf):
                (n,) = struct.unpack_from("<Q", buf, pos)
                self.records.append(buf[pos + 12:pos + 12 + n])
                pos += 16 + n

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        image = example_image(self.records[i])
        return torch.frombuffer(bytearray(image), dtype=torch.uint8).view(32, 32, 3)


class Images(torch.utils.data.Dataset):
    def __init__(self, data):
        self.files = sorted(glob.glob(f"{data}/imagenet/*/*"))
        self.crop = v2.RandomResizedCrop(224, antialias=True)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        image = torchvision.io.decode_image(torchvision.io.read_file(self.files[i]), torchvision.io.ImageReadMode.RGB)
        return self.crop(image)


def torchvision_gpu_decode_batches(data, batch):
    """torchvision's own GPU path: batched nvJPEG decoding
    (torchvision.io.decode_jpeg(device="cuda")), then RandomResizedCrop per
    image, flip and normalize with v2 on the GPU. Files read on this
    thread; PNGs (which decode_jpeg does not take) decoded on the CPU."""
    files = sorted(glob.glob(f"{data}/imagenet/*/*"))
    crop = v2.RandomResizedCrop(224, antialias=True)
    tail = v2.Compose([v2.RandomHorizontalFlip(), v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    order = torch.randperm(len(files)).tolist()
    at = 0
    while True:
        if at + batch > len(order):
            order, at = torch.randperm(len(files)).tolist(), 0
        names = [files[i] for i in order[at:at + batch]]
        at += batch
        encoded = [torchvision.io.read_file(n) for n in names]
        jpegs = [k for k, n in enumerate(names) if not n.lower().endswith(".png")]
        images = [None] * batch
        for k, image in zip(jpegs, torchvision.io.decode_jpeg([encoded[k] for k in jpegs], device="cuda",
                                                              mode=torchvision.io.ImageReadMode.RGB)):
            images[k] = image
        for k in range(batch):
            if images[k] is None:
                images[k] = torchvision.io.decode_image(encoded[k], torchvision.io.ImageReadMode.RGB).cuda()
        yield tail(torch.stack([crop(x) for x in images]).float() / 255)


def torch_batches(workload, data, workers):
    dev = torch.device("cuda")
    if workload == "w3_nvjpeg":
        yield from torchvision_gpu_decode_batches(data, 256)
        return
    if workload == "w1":
        ds, bs = Mnist(data), 8192
        tail = v2.Compose([v2.Normalize([0.1307], [0.3081]), v2.GaussianBlur(11, (0.1, 2.0))])
    elif workload == "w2":
        ds, bs = Cifar(data), 1024
        blur = v2.GaussianBlur(11, 0.8)
        aug = v2.Compose([v2.RandomHorizontalFlip(), v2.RandomAffine(degrees=36, scale=(0.9, 1.1))])
    else:
        ds, bs = Images(data), 256
        tail = v2.Compose([v2.RandomHorizontalFlip(),
                           v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    loader = torch.utils.data.DataLoader(ds, batch_size=bs, shuffle=True, num_workers=workers, pin_memory=True,
                                         drop_last=True, persistent_workers=True, prefetch_factor=4)
    while True:
        for x in loader:
            x = x.to(dev, non_blocking=True)
            if workload == "w1":
                yield tail((x.float() / 255).unsqueeze(1)).squeeze(1)
            elif workload == "w2":
                x = x.permute(0, 3, 1, 2).float()
                x = F.max_pool2d(x, 3, 1, 1)  # grey dilation 3x3
                yield aug(blur(x) / 255)
            else:
                yield tail(x.float() / 255)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--runs", type=int, default=3)
    # Long enough that the first batches' set-up does not weigh: W2 on the
    # GPU passes 30 batches in 30 ms.
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--workloads", default="w1,w2,w3", help="of w1, w2, w3, w3_nvjpeg")
    p.add_argument("--contenders", default="sluice_cpu,sluice_gpu,torch_gpu")
    args = p.parse_args()
    result = {"device": torch.cuda.get_device_name(), "cpus": os.cpu_count(), "torch": torch.__version__,
              "torchvision": torchvision.__version__, "workers": args.workers}
    for w in args.workloads.split(","):
        makers = {"sluice_cpu": lambda: sluice_batches(sluice_pipeline(w, args.data, False)),
                  "sluice_gpu": lambda: sluice_batches(sluice_pipeline(w, args.data, True)),
                  "torch_gpu": lambda: torch_batches(w, args.data, args.workers)}
        makers = {name: make for name, make in makers.items() if name in args.contenders.split(",")}
        runs = {name: [] for name in makers}
        for r in range(args.runs):
            for name, make in makers.items():
                batches = make()
                runs[name].append(timed(batches, args.batches))
                batches.close()
                log(f"{w} run {r + 1}: {name} {runs[name][-1][0]:,.0f} samples/s")
        out = {}
        for name, values in runs.items():
            out[name] = {"samples_per_s": statistics.median(v[0] for v in values),
                         "cpu_s_per_1m_samples": statistics.median(v[1] for v in values)}
        for peer in ("sluice_cpu", "torch_gpu"):
            if "sluice_gpu" in out and peer in out:
                out[f"gpu_vs_{peer}"] = out["sluice_gpu"]["samples_per_s"] / out[peer]["samples_per_s"]
        if w == "w3_nvjpeg":
            out["device_decode_stats"] = sluice.device_decode_stats()
        result[w] = out
    print(json.dumps(result))


if __name__ == "__main__":
    main()
