"""One rank of the DDP benchmark's sluice jobs (bench/ddp_bench.py runs it
under torchrun): W2 or W3 from pipelines/, each rank's batch the global one
divided by the ranks, through sluice.torch in-process or through the
node's pool, into bench/peers/ddp_loop.py's training loop.

    python -m torch.distributed.run --standalone --nproc_per_node=2 bench/ddp_sluice.py \\
        --workload w2|w3 --data DIR --out OUT.json [--node-pool] [--threads N]
        [--steps N] [--warmup W] [--save-state PATH] [--resume PATH]

--save-state writes rank 0's loader state after the timed steps; --resume
starts from one (saved on any number of ranks), and the JSON then says how
long the first batch took against a fresh start's.
"""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

import sluice
import sluice.torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench", "peers"))
import ddp_loop  # noqa: E402

GLOBAL_BATCH = {"w2": 1024, "w3": 256}


def pipeline(workload, data, ranks, threads):
    """The workload's pipeline reading `data`, each rank's batch its share."""
    name = "w2_cifar10" if workload == "w2" else "w3_imagenet"
    with open(os.path.join(REPO, "pipelines", f"{name}.json")) as f:
        definition = json.load(f)
    source = definition["nodes"][0]["source"]
    if workload == "w2":
        source["tfrecord"]["files"] = [os.path.join(data, "*.tfrecord")]
    else:
        source["image_folder"]["root"] = data
    batch = next(n["batch"] for n in definition["nodes"] if "batch" in n)
    batch["size"] = GLOBAL_BATCH[workload] // ranks
    definition.setdefault("options", {})["threads"] = threads
    return sluice.Pipeline.from_json(json.dumps(definition))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", choices=["w2", "w3"], required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--node-pool", action="store_true")
    p.add_argument("--threads", type=int, default=0, help="each rank's threads in-process (0: every core)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--save-state")
    p.add_argument("--resume")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    pipe = pipeline(args.workload, args.data, dist.get_world_size(), args.threads)
    loader = sluice.torch.TorchIterable(pipe, node_pool=args.node_pool, quiet=dist.get_rank() > 0)
    extra = {"loader": "sluice node pool" if args.node_pool else f"sluice in-process (threads {args.threads})"}
    if args.resume:
        state = torch.load(args.resume, weights_only=False)
        loader.load_state_dict(state)
        extra["resumed_state_bytes"] = len(state["position"])
    # The loader counts its epochs itself (each pass is the next).
    ddp_loop.run(loader, lambda epoch: None, lambda batch: batch["image"], args.warmup, args.steps, args.out, extra)
    if args.save_state and dist.get_rank() == 0:
        torch.save(loader.state_dict(), args.save_state)


if __name__ == "__main__":
    main()
    sluice.torch.exit_rank()
