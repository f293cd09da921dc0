"""Data-parallel jobs side by side (issue: data-parallel training): W2 and
W3 on 2 ranks of real torch.distributed (gloo), each rank training a small
DDP model on its loader's NCHW float32 batches (bench/peers/ddp_loop.py):

- sluice in-process per rank (threads: every core, and cores / ranks),
- sluice through the node's pool (node_pool=True),
- DataLoader + DistributedSampler, 2 workers per rank, under Debian's
  /usr/bin/python3: torchvision's transforms, and for W2 the OpenCV expert's
  (bench/peers/w2_opencv.py: whole batches by a BatchSampler).

Then resuming: a state saved on 2 ranks restored on 1, and one saved on 1
restored on 2, against fresh starts (the first batch's latency, the state's
size).

    .venv/bin/python bench/ddp_bench.py [--runs 5] [--workloads w2,w3] [--data DIR] [--json OUT]

Runs are interleaved (every configuration once per round) and the figures
are medians. The sluice jobs run under torchrun; Debian's torch 1.13
torchrun fails on Python 3.11 (its log-redirect map), so the DataLoader
jobs get the same environment (MASTER_ADDR/PORT, RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE) from a launcher here.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import sluice

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLUICE = os.path.join(os.path.dirname(sluice.__file__), "bin", "sluice")
RANKS = 2
# Timed steps per job: a few seconds each on 2 cores.
STEPS = {("w2", "sluice"): 150, ("w2", "torchvision"): 12, ("w2", "expert"): 60, ("w3", "sluice"): 24,
         ("w3", "torchvision"): 6}


def log(message):
    print(f"ddp_bench: {message}", file=sys.stderr, flush=True)


def ensure_data(root):
    for name, sub in (("cifar10", "cifar10"), ("imagenet", "imagenet")):
        if not os.path.isdir(os.path.join(root, sub)):
            log(f"making {name} under {root}")
            subprocess.run([SLUICE, "make-data", name, "--out", os.path.join(root, sub)], check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(command, ranks, launcher, out):
    """Runs one job of `ranks` ranks and returns rank 0's JSON result."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if launcher == "torchrun":
        processes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                       f"--nproc_per_node={ranks}", *command], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)]
    else:
        port = str(free_port())
        processes = [subprocess.Popen(command, env=dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                                        RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_RANK=str(r),
                                                        LOCAL_WORLD_SIZE=str(ranks)),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                     for r in range(ranks)]
    errors = [p.communicate(timeout=900)[1] for p in processes]
    failed = [(p.returncode, e) for p, e in zip(processes, errors) if p.returncode != 0]
    if failed:
        raise RuntimeError(f"{' '.join(command[:3])} exited with {failed[0][0]}:\n{failed[0][1][-3000:]}")
    with open(out) as f:
        return json.load(f)


def configurations(workload, data):
    """(name, command, launcher) per loader."""
    steps = ["--warmup", "3", "--steps"]
    sluice_job = [os.path.join(REPO, "bench", "ddp_sluice.py"), "--workload", workload, "--data", data,
                  *steps, str(STEPS[(workload, "sluice")])]
    def peer(kind):
        return ["/usr/bin/python3", os.path.join(REPO, "bench", "peers", "ddp_torch.py"), "--workload", workload,
                "--peer", kind, "--data", data, "--workers", "2", *steps, str(STEPS[(workload, kind)])]

    cores = len(os.sched_getaffinity(0))
    configs = [("sluice in-process", sluice_job, "torchrun"),
               (f"sluice in-process, {max(1, cores // RANKS)} thread(s)/rank",
                sluice_job + ["--threads", str(max(1, cores // RANKS))], "torchrun"),
               ("sluice node pool", sluice_job + ["--node-pool"], "torchrun"),
               ("DataLoader+DistributedSampler", peer("torchvision"), "env")]
    if workload == "w2":
        configs.append(("DataLoader+DistributedSampler, OpenCV expert", peer("expert"), "env"))
    return configs


def throughput(workloads, root, runs, tmp):
    results = {}
    for workload in workloads:
        data = os.path.join(root, "cifar10" if workload == "w2" else "imagenet")
        configs = configurations(workload, data)
        got = {name: [] for name, _, _ in configs}
        for round_ in range(runs):
            for name, command, launcher in configs:
                out = os.path.join(tmp, "result.json")
                result = run_job(command + ["--out", out], RANKS, launcher, out)
                got[name].append(result)
                log(f"{workload} round {round_ + 1}/{runs}: {name}: {result['samples_per_s']:,.0f} samples/s, "
                    f"trainer CPU {result['trainer_cpu']}, machine CPU {result['machine_cpu_ms_per_1k']:.1f} ms "
                    f"per 1,000 samples ({result['machine_cores_busy']:.2f} cores busy), output {result['output']}")
        results[workload] = {name: summarize(rs) for name, rs in got.items()}
    return results


def summarize(results):
    return {"samples_per_s": statistics.median(r["samples_per_s"] for r in results),
            "runs": [round(r["samples_per_s"]) for r in results],
            "trainer_cpu": statistics.median(statistics.mean(r["trainer_cpu"]) for r in results),
            "machine_cpu_ms_per_1k": statistics.median(r["machine_cpu_ms_per_1k"] for r in results),
            "machine_cores_busy": statistics.median(r["machine_cores_busy"] for r in results),
            "output": results[0]["output"]}


def resume(workloads, root, runs, tmp):
    """First-batch latency of resumed jobs (2 -> 1, 1 -> 2) against fresh
    ones of the same size."""
    results = {}
    for workload in workloads:
        data = os.path.join(root, "cifar10" if workload == "w2" else "imagenet")
        job = [os.path.join(REPO, "bench", "ddp_sluice.py"), "--workload", workload, "--data", data,
               "--warmup", "0", "--steps", "5"]
        got = {}
        for round_ in range(runs):
            for saved_on, resumed_on in ((2, 1), (1, 2)):
                state, out = os.path.join(tmp, "state.pt"), os.path.join(tmp, "result.json")
                run_job(job + ["--out", out, "--save-state", state], saved_on, "torchrun", out)
                # The first job after the save ran slower, whichever it was
                # (on 2 ranks after 1, up to 2x): one of the resumed size
                # goes first, not counted, and the two counted alternate.
                run_job(job + ["--out", out], resumed_on, "torchrun", out)
                order = ("resumed", "fresh") if round_ % 2 == 0 else ("fresh", "resumed")
                ran = {kind: run_job(job + ["--out", out] + (["--resume", state] if kind == "resumed" else []),
                                     resumed_on, "torchrun", out) for kind in order}
                resumed, fresh = ran["resumed"], ran["fresh"]
                key = f"{saved_on} -> {resumed_on}"
                got.setdefault(key, []).append((resumed["first_batch_s"], fresh["first_batch_s"],
                                                resumed["resumed_state_bytes"]))
                log(f"{workload} resume {key}: first batch {resumed['first_batch_s'] * 1e3:.0f} ms against "
                    f"{fresh['first_batch_s'] * 1e3:.0f} ms fresh; state {resumed['resumed_state_bytes']} bytes")
        results[workload] = {
            key: {"first_batch_ms": statistics.median(r for r, _, _ in v) * 1e3,
                  "fresh_first_batch_ms": statistics.median(f for _, f, _ in v) * 1e3,
                  "ratio": statistics.median(r / f for r, f, _ in v), "state_bytes": v[0][2]}
            for key, v in got.items()}
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--workloads", default="w2,w3")
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "sluice-ddp-data"))
    p.add_argument("--json", help="write the results here")
    p.add_argument("--skip-resume", action="store_true")
    args = p.parse_args()
    workloads = args.workloads.split(",")
    ensure_data(args.data)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        results = {"ranks": RANKS, "cores": len(os.sched_getaffinity(0)), "runs": args.runs,
                   "throughput": throughput(workloads, args.data, args.runs, tmp)}
        if not args.skip_resume:
            results["resume"] = resume(workloads, args.data, args.runs, tmp)
    results["seconds"] = round(time.time() - started)
    for workload, by_loader in results["throughput"].items():
        peer = max(r["samples_per_s"] for name, r in by_loader.items() if name.startswith("DataLoader"))
        for name, r in by_loader.items():
            print(f"{workload}  {name:46s} {r['samples_per_s']:>10,.0f} samples/s  {r['samples_per_s'] / peer:6.2f}x "
                  f"the strongest DataLoader  trainer CPU {r['trainer_cpu']:.2f}  machine CPU "
                  f"{r['machine_cpu_ms_per_1k']:.1f} ms/1k samples ({r['machine_cores_busy']:.2f} cores)  {r['output']}")
    for workload, by_move in results.get("resume", {}).items():
        for key, r in by_move.items():
            print(f"{workload}  resume {key}: first batch {r['first_batch_ms']:.0f} ms, fresh "
                  f"{r['fresh_first_batch_ms']:.0f} ms ({r['ratio']:.2f}x), state {r['state_bytes']} bytes")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
