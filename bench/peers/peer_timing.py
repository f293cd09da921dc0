"""Shared pieces of the benchmark peers (w1_torch.py, w2_torch.py,
w2_tfdata.py): the common command-line options, the stderr logger, and the
warm-up + timed loop that produces the peer's JSON result.

Standard library only, so it imports under Debian's /usr/bin/python3 and in
the peer venv alike. The scripts import it from their own directory.
"""

import json
import os
import sys
import time


def make_logger(name):
    """Return log(msg), printing "name: msg" to stderr (flushed)."""
    def log(msg):
        print(f"{name}: {msg}", file=sys.stderr, flush=True)
    return log


def add_common_args(p, data_help, batch_size, workers_help=None):
    """Add --data, --batches, --warmup, [--workers], --batch-size to `p`.

    --workers (int, default 2) is added only when `workers_help` is given;
    a peer with a different --workers adds its own.
    """
    p.add_argument("--data", required=True, help=data_help)
    p.add_argument("--batches", type=int, default=20, help="timed batches")
    p.add_argument("--warmup", type=int, default=2,
                   help="batches consumed before timing starts")
    if workers_help is not None:
        p.add_argument("--workers", type=int, default=2, help=workers_help)
    p.add_argument("--batch-size", type=int, default=batch_size)


def check_batches(p, args):
    """Reject --batches < 1 (argparse error, exit status 2)."""
    if args.batches < 1:
        p.error("--batches must be >= 1")


def check_loader_args(p, args):
    """check_batches, and the --warmup/--workers/--batch-size ranges of a
    DataLoader peer (argparse error, exit status 2)."""
    check_batches(p, args)
    if args.warmup < 0 or args.workers < 0 or args.batch_size < 1:
        p.error("--warmup/--workers must be >= 0 and --batch-size >= 1")


def epochs(loader, name, batch_size):
    """The loader's batches, epoch after epoch, for as long as the timing
    loop takes; exits naming `name` if an epoch yields no batch (the batch
    size too large for the data), where the loop would spin forever."""
    while True:
        got = 0
        for b in loader:
            got += 1
            yield b
        if got == 0:
            sys.exit(f"{name}: an epoch produced no full batch (batch size {batch_size} too large for the data)")


def time_batches(it, warmup, batches, peer, workload, log, describe=None):
    """Consume `warmup` batches from the iterator `it` untimed, then time
    `batches` more; return the result dict.

    Each batch is a pair (x, y); y.shape[0] is its sample count. Progress
    goes through `log`: one line per warm-up batch (`describe(x)`, default
    tuple(x.shape)), then every 5th timed batch and the last.
    """
    if describe is None:
        def describe(x):
            return f"{tuple(x.shape)}"
    t_start = time.perf_counter()
    for i in range(warmup):
        x, _ = next(it)
        log(f"warmup batch {i + 1}/{warmup} {describe(x)}")
    log(f"warmup done in {time.perf_counter() - t_start:.2f}s")

    samples = 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    for i in range(batches):
        x, y = next(it)
        samples += int(y.shape[0])
        if (i + 1) % 5 == 0 or i + 1 == batches:
            dt = time.perf_counter() - t0
            log(f"batch {i + 1}/{batches}: {samples / dt:.0f} samples/s")
    seconds = time.perf_counter() - t0
    trainer_cpu_s = time.process_time() - cpu0  # this process's, not its workers'

    return {"peer": peer, "workload": workload, "samples": samples,
            "seconds": round(seconds, 6), "trainer_cpu_s": round(trainer_cpu_s, 4),
            "samples_per_s": round(samples / seconds, 3),
            "output": describe_output(x)}


# DALI's type names, as the others name them.
_DALI_TYPES = {"FLOAT": "float32", "FLOAT16": "float16", "UINT8": "uint8", "INT32": "int32", "INT64": "int64"}


def describe_output(x):
    """One sample of batch `x` as "dtype[shape]" (e.g. "float32[3,32,32]"),
    whatever the framework (torch, numpy, tf, a DALI TensorList): what the
    bench compares with sluice's output. None for a batch it cannot read."""
    try:
        shape = x.shape() if callable(x.shape) else x.shape
        dtype = x.dtype() if callable(x.dtype) else x.dtype
        if len(shape) and isinstance(shape[0], (list, tuple)):  # a TensorList: one shape a sample
            sample = list(shape[0])
        else:
            sample = list(shape)[1:]
        name = getattr(dtype, "name", None) or str(dtype)
        name = _DALI_TYPES.get(name, name).replace("torch.", "")
        return f"{name}[{','.join(str(int(d)) for d in sample)}]"
    except Exception:  # noqa: BLE001 (a batch of a kind this does not know: say nothing)
        return None


def print_result(result):
    """Print the result as the last line on stdout (one JSON object)."""
    print(json.dumps(result), flush=True)


def tree_memory(pid):
    """(RSS, PSS) in bytes of process `pid` and all its descendants, summed.
    PSS splits each shared page among the processes sharing it, so the sum
    is what the tree holds (summed RSS counts shared pages once per process):
    what shows forked workers' copy-on-read growth."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(parent, []).append(int(entry))
    rss = pss = 0
    pending = [pid]
    while pending:
        p = pending.pop()
        pending += children.get(p, [])
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss
