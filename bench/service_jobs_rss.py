#!/usr/bin/env python3
"""Does the dispatcher forget finished jobs? Runs many short jobs (each a
consumer reading one epoch of a small pipeline under its own job name, then
leaving) against a real dispatcher and worker, and prints the dispatcher's
resident memory after the first WARM jobs and after all of them.

Usage: service_jobs_rss.py [--jobs 1000] [--warm 10] [--work-dir DIR]
Runs with the `sluice` package and command of the current environment.
"""

import argparse
import signal
import subprocess
import tempfile
import time

import numpy as np

import sluice


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def start(args):
    process = subprocess.Popen(["sluice", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return process, int(process.stdout.readline().split()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--work-dir", help="journal folder (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dispatcher, port = start(["dispatcher", "--host", "127.0.0.1", "--port", "0",
                                  "--work-dir", args.work_dir or f"{tmp}/work"])
        worker, _ = start(["worker", "--dispatcher", f"127.0.0.1:{port}", "--host", "127.0.0.1",
                           "--threads", "1"])
        data = {"id": np.arange(256, dtype=np.int64), "x": np.ones((256, 16), np.float32)}
        started = time.perf_counter()
        try:
            for job in range(args.jobs):
                pipe = (sluice.arrays(data, split_records=64)
                        .distribute(f"127.0.0.1:{port}", job_name=f"short-{job}").batch(64))
                rows = sum(len(batch["id"]) for batch in pipe)
                assert rows == 256, f"job {job}: {rows} rows"
                del pipe
                if job + 1 == args.warm:
                    warm_rss = rss_kib(dispatcher.pid)
                if (job + 1) % 100 == 0:
                    print(f"{job + 1} jobs, dispatcher RSS {rss_kib(dispatcher.pid)} KiB", flush=True)
            time.sleep(1)  # the last release reaches the dispatcher
            end_rss = rss_kib(dispatcher.pid)
            status = subprocess.run(["sluice", "status", "--dispatcher", f"127.0.0.1:{port}"],
                                    capture_output=True, text=True).stdout
        finally:
            for process in (worker, dispatcher):
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
    elapsed = time.perf_counter() - started
    print(f"dispatcher RSS after {args.warm} jobs: {warm_rss} KiB; after {args.jobs}: {end_rss} KiB "
          f"({end_rss / warm_rss:.3f}x); {args.jobs / elapsed:.1f} jobs/s")
    print(status.strip())


if __name__ == "__main__":
    main()
