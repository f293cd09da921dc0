"""A training loop checkpointed mid-epoch and resumed in a new process, as
after a preemption: the checkpoint holds the model, the optimizer and the
data loader's position (about 120 bytes), and the resumed run trains on
exactly the batches the interrupted one had not yet seen, with the same
augmentation.

    .venv/bin/python examples/resume_training.py --data data/mnist --stop-at 3 --checkpoint /tmp/ckpt.pt
    .venv/bin/python examples/resume_training.py --data data/mnist --resume /tmp/ckpt.pt

Each run prints one line per step (epoch, step, the first labels of its
batch and the loss), so the two runs' lines can be set beside one
uninterrupted run's (without --stop-at): the resumed run's lines are the
uninterrupted run's from the step after the checkpoint.
"""

import argparse

import torch

import sluice
import sluice.torch
from sluice import ops


def loader(data):
    raw = f"{data}/MNIST/raw"  # where sluice make-data (and torchvision) put the IDX files
    pipe = (sluice.mnist(f"{raw}/train-images-idx3-ubyte", f"{raw}/train-labels-idx1-ubyte")
            .shuffle(10000)  # resumes too: the state holds the draws made, not the buffer
            .map(ops.normalize(mean=0.1307, std=0.3081, scale=1 / 255),
                 ops.gaussian_blur(ksize=5, sigma=[0.1, 1.0]))
            .batch(100)
            .with_options(seed=1))
    return sluice.torch.TorchIterable(pipe)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="MNIST's folder, with MNIST/raw/ (sluice make-data mnist writes data/mnist)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--stop-at", type=int, default=0, help="checkpoint after this many steps and stop")
    p.add_argument("--checkpoint", default="checkpoint.pt")
    p.add_argument("--resume", help="a checkpoint to go on from")
    args = p.parse_args(argv)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = loader(args.data)
    step, start_epoch = 0, 0
    if args.resume:
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        data.load_state_dict(ckpt["data"])
        step, start_epoch = ckpt["step"], ckpt["epoch"]
    for epoch in range(start_epoch, args.epochs):
        for batch in data:
            loss = torch.nn.functional.cross_entropy(model(batch["image"]), batch["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            print(f"epoch {epoch} step {step} labels {batch['label'][:6].tolist()} loss {loss.item():.4f}",
                  flush=True)
            if step == args.stop_at:
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "data": data.state_dict(),
                            "step": step, "epoch": epoch}, args.checkpoint)
                print(f"checkpoint after step {step}: {args.checkpoint}", flush=True)
                return


if __name__ == "__main__":
    main()
