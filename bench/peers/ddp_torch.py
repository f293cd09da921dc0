#!/usr/bin/python3
"""DDP peer: DataLoader + DistributedSampler on every rank of a torchrun
job, W2 (CIFAR-10 TFRecords read once into memory, then per sample
dilation, blur, rescale, flip, rotation and zoom in torch, as
w2_torch.py; or `--peer expert`: the OpenCV expert's work of w2_opencv.py,
whole uint8 batches by index lists from a BatchSampler over the
DistributedSampler, made float once per batch) or W3 (torchvision
ImageFolder, RandomResizedCrop(224), flip, ToTensor, Normalize, as
w3_torch.py). NCHW float32 out, as sluice's.

    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node=2 \\
        bench/peers/ddp_torch.py --workload w2|w3 --data DIR --out OUT.json \\
        [--peer torchvision|expert] [--global-batch G] [--steps N] [--warmup W] [--workers 2]

What a skilled user writes: a map-style dataset (DistributedSampler needs
one), whole-epoch shuffles by the sampler, `set_epoch` every epoch,
persistent workers.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler  # noqa: E402

import ddp_loop  # noqa: E402
import w2_opencv  # noqa: E402
import w2_torch  # noqa: E402


class CifarRecords(Dataset):
    """The W2 TFRecords' (image bytes, label) parsed once, transformed per
    sample in the workers."""

    def __init__(self, data):
        example_pb2 = w2_torch.load_example_pb2()
        files = w2_torch.tfrecord_files(data, "ddp_torch")
        self.records = list(w2_torch.cifar_examples(example_pb2, files))
        self.transform = w2_torch.make_transform()

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        image, label = self.records[i]
        return self.transform(image), label


class ExpertCifarBatches(CifarRecords):
    """Whole batches by lists of indices: the expert's OpenCV work per
    sample into one uint8 batch, made NCHW float32 once."""

    def __init__(self, data):
        super().__init__(data)
        self.transform = None  # made in each worker, after the fork

    def __getitem__(self, indices):
        import numpy as np
        if self.transform is None:
            self.transform = w2_opencv.ExpertTransform()
        images = np.empty((len(indices), 32, 32, 3), np.uint8)
        for n, i in enumerate(indices):
            self.transform(self.records[i][0], images[n])
        return w2_opencv.to_nchw_float(images), torch.tensor([self.records[i][1] for i in indices])


def dataset(workload, peer, data):
    if workload == "w2":
        return ExpertCifarBatches(data) if peer == "expert" else CifarRecords(data)
    from torchvision import datasets, transforms
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), normalize])
    return datasets.ImageFolder(data, transform=tf)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", choices=["w2", "w3"], required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--peer", choices=["torchvision", "expert"], default="torchvision",
                   help="expert: W2 with OpenCV on whole batches (w2_opencv.py)")
    p.add_argument("--global-batch", type=int, default=0, help="0: 1024 for w2, 256 for w3")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    global_batch = args.global_batch or (1024 if args.workload == "w2" else 256)
    if args.peer == "expert" and args.workload != "w2":
        p.error("--peer expert is W2's")
    data = dataset(args.workload, args.peer, args.data)
    sampler = DistributedSampler(data, shuffle=True, drop_last=True, seed=0)
    per_rank = global_batch // dist.get_world_size()
    common = {"num_workers": args.workers, "persistent_workers": args.workers > 0}
    if args.peer == "expert":
        loader = DataLoader(data, sampler=BatchSampler(sampler, per_rank, drop_last=True), batch_size=None,
                            worker_init_fn=w2_opencv.worker_init, **common)
    else:
        loader = DataLoader(data, batch_size=per_rank, sampler=sampler, drop_last=True, **common)
    ddp_loop.run(loader, sampler.set_epoch, lambda batch: batch[0], args.warmup, args.steps, args.out,
                 {"loader": f"DataLoader+DistributedSampler, {args.peer} ({args.workers} workers/rank)",
                  "torch": torch.__version__})


if __name__ == "__main__":
    main()
    ddp_loop.end_job()
