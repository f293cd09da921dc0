#!/usr/bin/env python3
"""Chaos soak of the service through the public CLI and Python API.

Each round starts a dispatcher (with a journal), three workers and two
consumer processes sharing one named job that reads an epoch of numbered
samples, then, at random points of the epoch, kills (SIGKILL) workers,
consumers and the dispatcher, which stays down 0 to 15 s before it restarts
on the same port and work dir. Killed workers are replaced.

A round passes when the consumers finished (no hang within the round's
deadline), no surviving consumer saw a sample twice, and every sample
reached a consumer. A killed consumer is the service's documented
exception: the splits it had not finished are re-issued whole to the
others (so samples it had already taken arrive again: counted as
"re-issued"), and what it had received but not yet taken dies with it
(at most a split per stream and a batch: counted as "in a dead consumer's
buffers"). It reports, per dispatcher restart, the time from the restart to
the next batch any consumer took, for restarts that no other kill follows
before that batch and no dead consumer's splits hold up (those wait for
--client-timeout, 5 s). The workers hand batches over through the
consumers' shared-memory rings, as on one host they do; with --tcp, over
TCP, as from other machines.

Usage: chaos.py [--rounds 50] [--seed 1] [--tcp]   (bench/chaos.sh ROUNDS runs it)
"""

import argparse
import glob
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROWS = 24000
SPLIT_ROWS = 200
ROUND_DEADLINE_S = 180

_CONSUMER = r"""
import json, sys, time
import numpy as np
import sluice
address, job, rows, split_rows, throttle = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
shared_memory_mb = int(sys.argv[6])
base = sluice.arrays({"id": np.arange(rows, dtype=np.int64), "pad": np.zeros((rows, 56), np.uint8)},
                     split_records=split_rows)
d = json.loads(base.to_json())
d["nodes"][0]["source"]["throttle_bytes_per_s"] = throttle  # an epoch of seconds, not milliseconds
pipe = sluice.Pipeline(d).distribute(address, job_name=job, max_outstanding=1,
                                     shared_memory_mb=shared_memory_mb).batch(50)
try:
    for batch in pipe:
        print(f"{time.time():.3f} " + " ".join(str(int(i)) for i in batch["id"]), flush=True)
except Exception as e:
    print(f"error {type(e).__name__}: {e}", flush=True)
    sys.exit(1)
print("end", flush=True)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Consumer:
    """A consumer process; a thread collects what it prints."""

    def __init__(self, address, job, throttle, tcp):
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CONSUMER, address, job, str(ROWS), str(SPLIT_ROWS), str(throttle),
             "-1" if tcp else "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.batches = []  # (time, ids)
        self.ended = False
        self.error = ""
        self.killed = False
        self.killed_at = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.process.stdout:
            line = line.strip()
            if line == "end":
                self.ended = True
            elif line.startswith("error"):
                self.error = line
            elif line:
                stamp, *ids = line.split()
                self.batches.append((float(stamp), [int(i) for i in ids]))

    def kill(self):
        self.killed = True
        self.killed_at = time.time()
        self.process.kill()


def start_server(args, port_line="listening on port"):
    process = subprocess.Popen(["sluice", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    if port_line not in line:
        raise RuntimeError(f"sluice {args[0]} did not start: {line!r}")
    return process


def run_round(number, rng, port, log, tcp):
    with tempfile.TemporaryDirectory() as work:
        address = f"127.0.0.1:{port}"
        dispatcher_args = ["dispatcher", "--host", "127.0.0.1", "--port", str(port), "--work-dir", work]
        dispatcher = start_server(dispatcher_args)
        worker_args = ["worker", "--dispatcher", address, "--host", "127.0.0.1", "--threads", "1"]
        workers = [start_server(worker_args) for _ in range(3)]
        # 3 workers at this rate read the epoch in about 10 s.
        throttle = ROWS * 64 / 20 / 3
        consumers = [Consumer(address, f"chaos-{number}", throttle, tcp) for _ in range(2)]
        started = time.time()
        events = []
        restarts = []
        kinds = rng.sample(["worker", "consumer", "dispatcher", "worker", "dispatcher"], rng.randint(1, 3))
        plan = sorted((rng.uniform(0.5, 9.0), kind) for kind in kinds)
        hang = False
        restart_next = []  # per restart: when the next kill came
        try:
            for at, kind in plan:
                while time.time() - started < at:
                    time.sleep(0.05)
                if len(restart_next) < len(restarts):
                    restart_next.append(time.time())
                if kind == "worker":
                    victim = rng.randrange(len(workers))
                    workers[victim].kill()
                    workers[victim].wait()
                    workers[victim] = start_server(worker_args)
                    events.append(f"worker killed at {at:.1f}s")
                elif kind == "consumer":
                    alive = [c for c in consumers if not c.killed]
                    if len(alive) > 1:  # keep one to finish the epoch
                        rng.choice(alive).kill()
                        events.append(f"consumer killed at {at:.1f}s")
                else:
                    outage = rng.uniform(0, 15)
                    dispatcher.kill()
                    dispatcher.wait()
                    time.sleep(outage)
                    dispatcher = start_server(dispatcher_args)
                    restarts.append(time.time())
                    events.append(f"dispatcher down {outage:.1f}s at {at:.1f}s")
            restart_next += [float("inf")] * (len(restarts) - len(restart_next))
            for c in consumers:
                remaining = ROUND_DEADLINE_S - (time.time() - started)
                try:
                    c.process.wait(timeout=max(1, remaining))
                except subprocess.TimeoutExpired:
                    hang = True
                    c.process.kill()
                c.thread.join(timeout=10)
        finally:
            for process in workers + [dispatcher]:
                process.send_signal(signal.SIGTERM)
            for process in workers + [dispatcher]:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
    survivors = [c for c in consumers if not c.killed]
    victims = [c for c in consumers if c.killed]
    survived = {}
    for c in survivors:
        for _, ids in c.batches:
            for i in ids:
                survived[i] = survived.get(i, 0) + 1
    victim_ids = set(i for c in victims for _, ids in c.batches for i in ids)
    duplicates = sum(1 for n in survived.values() if n > 1)
    reissued = len(victim_ids & survived.keys())
    seen = victim_ids | survived.keys()
    missing = ROWS - len(seen)
    # What a killed consumer had received but not taken: at most a split per
    # stream in flight (3 workers) and the batch it was making.
    buffered = sum(3 * SPLIT_ROWS + 50 for c in victims)
    failed_survivor = [c.error or "no end" for c in survivors if not c.ended]
    ok = not hang and duplicates == 0 and missing <= buffered and not failed_survivor
    recoveries = []
    for restart, next_event in zip(restarts, restart_next):
        after = [t for c in consumers for t, _ in c.batches if t >= restart]
        if after and min(after) < next_event and not any(v.killed_at < restart for v in victims):
            recoveries.append(min(after) - restart)
    log(f"round {number}: {'ok' if ok else 'FAILED'} in {time.time() - started:.1f}s; "
        f"{'; '.join(events)}; {len(seen)} ids, {duplicates} twice to survivors, {reissued} re-issued, "
        f"{missing} missing (in a dead consumer's buffers: up to {buffered}){'; HANG' if hang else ''}"
        f"{'; ' + ', '.join(failed_survivor) if failed_survivor else ''}"
        f"{'; next batch ' + ', '.join(f'{r:.2f}s' for r in recoveries) + ' after restart' if recoveries else ''}")
    return ok, hang, recoveries


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tcp", action="store_true", help="batches over TCP, not the consumers' rings")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    port = free_port()
    passed = hangs = 0
    recoveries = []
    for number in range(1, args.rounds + 1):
        ok, hang, rec = run_round(number, rng, port, lambda m: print(m, flush=True), args.tcp)
        passed += ok
        hangs += hang
        recoveries += rec
    # Consumers killed -9 leave their rings; a worker on the host removes them.
    rings_left = len(glob.glob("/dev/shm/sluice-ring-*"))
    summary = {"rounds": args.rounds, "exactly_once": passed, "hangs": hangs,
               "restarts": len(recoveries), "rings_left_in_dev_shm": rings_left}
    if recoveries:
        summary["next_batch_after_restart_s"] = {
            "median": round(statistics.median(recoveries), 3), "max": round(max(recoveries), 3)}
    print(json.dumps(summary))
    sys.exit(0 if passed == args.rounds else 1)


if __name__ == "__main__":
    main()
