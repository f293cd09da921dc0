"""A data-parallel training job for the tests, run under torchrun (gloo on
the CPU): a small model trained with DDP on a sluice pipeline, each rank
logging the sample ids it trained on, rank 0 checkpointing model and loader
after every step.

    python -m torch.distributed.run --nproc_per_node=N ddp_job.py OUT [--epochs E]
        [--resume] [--slow-after STEP] [--seed S] [--global-batch G] [--node-pool]
        [--batch-skew] [--eval-on-rank0] [--same-shard] [--alone-unmarked] [--resume-rank0-only]

OUT/rank<R>.log gets one line per step trained: "epoch step id id ...".
OUT/ckpt.pt holds the last checkpoint (written atomically). --slow-after
makes every step past STEP of the last epoch sleep, so that a test can kill
a rank mid-epoch. --seed-per-rank gives each rank another seed (the ranks'
check must refuse it), --batch-skew another batch size, --scale-per-rank
another attr of an op, --resume-rank0-only loads the checkpoint's loader
state on rank 0 alone. --node-pool runs
the ranks' pipelines in the node's pool of sluice processes. OUT/len<R>.txt
holds len(loader) on rank R. --eval-on-rank0 has rank 0 read the whole
pipeline once more after training, with a loader of its own (rank 0 of 1)
while the others wait at a barrier, and write its sample count to
OUT/eval.txt. --same-shard gives every rank shard 0 (the ranks' check
must refuse it). --alone-unmarked has rank 0 iterate a loader alone
without saying rank=0, world_size=1 (the process group's timeout is 30 s
then): its check waits for ranks that never come and must say so.
"""

import argparse
import datetime
import faulthandler
import os
import signal
import time

import numpy as np
import torch
import torch.distributed as dist

import sluice
import sluice.torch
from sluice import ops

ROWS = 300


def pipeline(seed, scale=1 / 255):
    ids = np.arange(ROWS, dtype=np.int64)
    images = (np.arange(ROWS * 8 * 8 * 3) % 251).astype(np.uint8).reshape(ROWS, 8, 8, 3)
    return (sluice.arrays({"id": ids, "image": images}, split_records=20)
            .shuffle(32)
            .map(ops.random_flip(), ops.rescale(scale=scale))
            .with_options(seed=seed))


def main():
    faulthandler.enable()  # a rank that aborts shows where each thread was
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--slow-after", type=int, default=-1)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--seed-per-rank", action="store_true")
    p.add_argument("--global-batch", type=int, default=24)
    p.add_argument("--node-pool", action="store_true")
    p.add_argument("--keep-loader", action="store_true")
    p.add_argument("--batch-skew", action="store_true")
    p.add_argument("--eval-on-rank0", action="store_true")
    p.add_argument("--same-shard", action="store_true")
    p.add_argument("--alone-unmarked", action="store_true")
    p.add_argument("--kill-pool-worker", type=int, default=-1)
    p.add_argument("--files-in", default="")
    p.add_argument("--epoch-per-rank", action="store_true")
    p.add_argument("--scale-per-rank", action="store_true")
    p.add_argument("--resume-rank0-only", action="store_true")
    args = p.parse_args()
    if args.alone_unmarked:
        from sluice import _distributed
        _distributed._PATIENCE = datetime.timedelta(seconds=2)  # said long before rank 1's barrier times out
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
        if dist.get_rank() == 0:
            list(sluice.torch.TorchIterable(pipeline(args.seed).batch(10), quiet=True))
        dist.barrier()
        return
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.files_in:  # one pattern, each rank's own folder (a node-local copy)
        os.chdir(os.path.join(args.files_in, str(rank)))
        next(iter(sluice.torch.TorchIterable(sluice.tfrecord("*.tfrecord", {"label": "int64"}).batch(4))))
        return
    seed = args.seed + rank if args.seed_per_rank else args.seed
    batch = args.global_batch // world + (rank if args.batch_skew else 0)
    made = pipeline(seed, 1 / (255 + rank)) if args.scale_per_rank else pipeline(seed)
    sharded = made.shard(world, 0) if args.same_shard else made
    loader = sluice.torch.TorchIterable(sharded.batch(batch), node_pool=args.node_pool)
    if args.keep_loader:  # as a script without functions does: exit_rank must release it
        KEPT.append(loader)
    if args.epoch_per_rank:
        loader.set_epoch(rank)
    with open(os.path.join(args.out, f"len{rank}.txt"), "w") as f:
        f.write(str(len(loader)))
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8 * 8 * 3, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    ckpt = os.path.join(args.out, "ckpt.pt")
    step = 0
    if args.resume:
        state = torch.load(ckpt, weights_only=False)
        model.module.load_state_dict(state["model"])
        if rank == 0 or not args.resume_rank0_only:
            loader.load_state_dict(state["loader"])
        step = state["step"]
    resumed = args.resume and loader.state_dict()["position"]
    first_epoch = loader.state_dict()["next_epoch"] - (1 if resumed else 0)
    log = open(os.path.join(args.out, f"rank{rank}.log"), "a")
    for epoch in range(max(first_epoch, 0), args.epochs):
        for batch in loader:
            loss = model(batch["image"].reshape(len(batch["id"]), -1)).square().mean()
            optimizer.zero_grad()
            loss.backward()  # DDP's all-reduce: every rank must take as many steps
            optimizer.step()
            step += 1
            log.write(f"{epoch} {step} " + " ".join(str(int(i)) for i in batch["id"]) + "\n")
            log.flush()
            if rank == 0:
                tmp = ckpt + ".tmp"
                torch.save({"model": model.module.state_dict(), "loader": loader.state_dict(), "step": step}, tmp)
                os.replace(tmp, ckpt)
            dist.barrier()  # the checkpoint of this step is on disk before any rank goes on
            if rank == 0 and step == args.kill_pool_worker:  # as the OOM killer would
                from sluice import _node_pool
                os.kill(_node_pool._pool[1][0].pid, signal.SIGKILL)
            if epoch == args.epochs - 1 and 0 <= args.slow_after < step:
                time.sleep(0.5)
    log.close()
    if args.eval_on_rank0:
        if rank == 0:
            alone = sluice.torch.TorchIterable(pipeline(seed).batch(10), rank=0, world_size=1, quiet=True)
            with open(os.path.join(args.out, "eval.txt"), "w") as f:
                f.write(str(sum(len(b["id"]) for b in alone)))
        dist.barrier()


KEPT = []


if __name__ == "__main__":
    main()
    sluice.torch.exit_rank()
