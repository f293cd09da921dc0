"""Trains the small MNIST CNN (two 3x3 convs 32/64, max-pool, dropout,
fc 9216 -> 128 -> 10, Adadelta) for N steps, fed by sluice (W1: normalize +
11x11 blur with random sigma) or, with --peer, by the torch DataLoader doing
the same. Prints samples/s and the share of step time spent waiting for data.

    .venv/bin/python examples/train_mnist.py --steps 50
    .venv/bin/python examples/train_mnist.py --steps 50 --peer   # torchvision needed
"""

import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def sluice_batches(raw, batch_size):
    import sluice
    import sluice.torch
    from sluice import ops
    pipe = (sluice.mnist(f"{raw}/train-images-idx3-ubyte", f"{raw}/train-labels-idx1-ubyte")
            .shuffle(10000)
            .map(ops.normalize(mean=0.1307, std=0.3081, scale=1 / 255),
                 ops.gaussian_blur(ksize=11, sigma=[0.1, 2.0]))
            .batch(batch_size, drop_remainder=True)
            .prefetch(4))
    loader = sluice.torch.TorchIterable(pipe)
    while True:
        for b in loader:
            yield b["image"].unsqueeze(1), b["label"]


def peer_batches(root, batch_size):
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,)),
                             transforms.GaussianBlur(11)])
    loader = torch.utils.data.DataLoader(datasets.MNIST(root, train=True, download=False, transform=tf),
                                         batch_size=batch_size, shuffle=True, num_workers=2,
                                         drop_last=True, persistent_workers=True)
    while True:
        for x, y in loader:
            yield x, y


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data/mnist", help="make-data mnist output directory")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=3, help="steps before timing starts")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--peer", action="store_true", help="feed from torch's DataLoader instead")
    p.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = p.parse_args()

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    batches = (peer_batches(args.data, args.batch_size) if args.peer
               else sluice_batches(f"{args.data}/MNIST/raw", args.batch_size))

    wait = compute = 0.0
    samples = 0
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        x, y = next(batches)
        t1 = time.perf_counter()
        loss = F.nll_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        if step >= args.warmup:
            wait += t1 - t0
            compute += t2 - t1
            samples += x.shape[0]
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
    total = wait + compute
    feeder = "torch DataLoader" if args.peer else "sluice"
    print(f"{feeder}: {samples / total:,.0f} samples/s, waiting for data {100 * wait / total:.1f}% "
          f"of step time ({args.steps} steps of {args.batch_size})", flush=True)
    if args.json:
        print(json.dumps({"feeder": feeder, "samples_per_s": samples / total,
                          "wait_share": wait / total, "steps": args.steps,
                          "batch_size": args.batch_size, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
