"""Shared pieces of the benchmark peers (w1_torch.py, w2_torch.py,
w2_tfdata.py): the common command-line options, the stderr logger, and the
warm-up + timed loop that produces the peer's JSON result.

Standard library only, so it imports under Debian's /usr/bin/python3 and in
the peer venv alike. The scripts import it from their own directory.
"""

import json
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
    t0 = time.perf_counter()
    for i in range(batches):
        x, y = next(it)
        samples += int(y.shape[0])
        if (i + 1) % 5 == 0 or i + 1 == batches:
            dt = time.perf_counter() - t0
            log(f"batch {i + 1}/{batches}: {samples / dt:.0f} samples/s")
    seconds = time.perf_counter() - t0

    return {"peer": peer, "workload": workload, "samples": samples,
            "seconds": round(seconds, 6),
            "samples_per_s": round(samples / seconds, 3),
            "output": describe_output(x)}


def describe_output(x):
    """One sample of batch `x` as "dtype[shape]" (e.g. "float32[3,32,32]"),
    whatever the framework: what the bench compares with sluice's output."""
    dtype = getattr(x.dtype, "name", None) or str(x.dtype).replace("torch.", "")
    return f"{dtype}[{','.join(str(int(d)) for d in tuple(x.shape)[1:])}]"


def print_result(result):
    """Print the result as the last line on stdout (one JSON object)."""
    print(json.dumps(result), flush=True)
