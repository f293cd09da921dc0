"""One set of sluice processes per node serving every rank of the node
(docs/distributed.md, "One pool per node"): the node's local rank 0 starts a
dispatcher and one worker on 127.0.0.1 with a thread per core; the node's
ranks learn the dispatcher's address through torch.distributed; each rank's
pipeline then runs on that worker up to its batch (its shard's stream, in
order, through a shared-memory ring) and the rest in the rank's process.
Eight ranks with a pool of their own threads each would run eight times as
many threads as the node has cores."""

import atexit
import os
import socket
import subprocess
import sys
import threading
import time

_BINARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "sluice")
_pool = None  # (address, [worker, dispatcher]) of the pool this process started
_lock = threading.Lock()
_stopping = threading.Event()


def address(dist):
    """The dispatcher of this node's pool, started here when this is the
    node's local rank 0. A collective: every rank calls it."""
    if "LOCAL_RANK" not in os.environ:
        # Each rank took itself for local rank 0 and started a pool (mp.spawn sets none).
        raise RuntimeError("sluice.torch node_pool: LOCAL_RANK is not set, so this rank cannot tell whether it "
                           "starts its node's pool; run under torchrun (it sets LOCAL_RANK, LOCAL_WORLD_SIZE and "
                           "GROUP_RANK), or set them in each process before making the loader")
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(dist.get_world_size())))
    # The node: torchrun's GROUP_RANK, and the host (two nodes' ranks on one
    # host, or hosts of one name, would otherwise share a pool's 127.0.0.1).
    node = (socket.gethostname(), os.environ.get("GROUP_RANK", ""))
    mine = _start(local_world) if local_rank == 0 else None
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, (node, local_rank, mine))
    for where, rank, started in everyone:
        if where == node and rank == 0 and started is not None:
            return started
    raise RuntimeError(f"sluice.torch node_pool: no rank on {node[0]} (node {node[1] or '?'}) has LOCAL_RANK 0 to "
                       "start the node's pool (run under torchrun, which sets LOCAL_RANK and LOCAL_WORLD_SIZE)")


def _start(local_world):
    """Starts the node's dispatcher and worker once per process; both exit
    when this process does (--exit-with)."""
    global _pool
    with _lock:
        if _pool is None:
            threads = max(1, len(os.sched_getaffinity(0)) // max(1, local_world))
            dispatcher, port = _spawn(["dispatcher", "--port", "0", "--quiet"], "dispatcher listening on port")
            dispatcher_address = f"127.0.0.1:{port}"
            worker_args = ["worker", "--dispatcher", dispatcher_address, "--threads", str(threads), "--quiet"]
            worker, _ = _spawn(worker_args, "worker listening on port")
            _pool = (dispatcher_address, [worker, dispatcher])
            atexit.register(_stop)
            threading.Thread(target=_keep_a_worker, args=(worker_args,), daemon=True).start()
        return _pool[0]


# A worker that ends within QUICK_S of its start this many times in a row
# (it cannot run here: killed for memory as it starts, a broken binary) is
# not replaced again, nor is one that cannot be started for START_TRIES_S.
QUICK_DEATHS = 5
QUICK_S = 10
START_TRIES_S = 30
# The node's own dispatcher, a process on this host: gone this long, it is
# gone (one across a network gets the distribute node's 60 s).
DISPATCHER_TIMEOUT_S = 30
# Registering has the pool's worker load the ranks' Python code (a torch
# Dataset, its imports) in a fresh process: on a busy node that outlasts
# the distribute node's 30 s.
REGISTER_TIMEOUT_S = 300


def _keep_a_worker(worker_args):
    """Starts another worker when the node's dies (killed for memory, say):
    the ranks' streams go on from where they were on it, rather than every
    rank waiting for a worker that never comes. Gives up on one that cannot
    run (QUICK_DEATHS): the dispatcher stops, and the ranks' reading fails
    once it is gone for their dispatcher timeout, not waiting for good."""
    started, quick, failing_since = time.monotonic(), 0, None
    while not _stopping.wait(0.5):
        worker = _pool[1][0]
        if worker.poll() is None:
            continue
        if failing_since is None:
            quick = quick + 1 if time.monotonic() - started < QUICK_S else 0
        if quick >= QUICK_DEATHS or (failing_since and time.monotonic() - failing_since > START_TRIES_S):
            _give_up(worker, quick)
            return
        replacement, failure = _replace(worker_args)
        if replacement is None:
            if failure is None:  # stopping
                return
            failing_since = failing_since or time.monotonic()
            sys.stderr.write(f"sluice.torch node_pool: cannot start a worker in place of the one that exited: "
                             f"{failure}; trying again in 5 s\n")
            time.sleep(5)
            continue
        started, failing_since = time.monotonic(), None
        sys.stderr.write(f"sluice.torch node_pool: the node's worker (pid {worker.pid}) exited with status "
                         f"{worker.returncode}; started {replacement.pid} in its place (the ranks' streams go on)\n")


def _replace(worker_args):
    """(a new worker in the pool, None), or (None, why it could not start;
    None when the pool is stopping)."""
    with _lock:
        if _stopping.is_set():
            return None, None
        try:
            replacement, _ = _spawn(worker_args, "worker listening on port")
        except Exception as e:  # noqa: BLE001 (said, and tried again: the ranks wait for a worker)
            return None, e
        _pool[1][0] = replacement
        return replacement, None


def _give_up(worker, quick):
    why = (f"exited {quick} times within {QUICK_S} s of its start" if quick >= QUICK_DEATHS else
           f"could not be started again for {START_TRIES_S} s")
    sys.stderr.write(f"sluice.torch node_pool: the node's worker {why} (the last, pid {worker.pid}, with status "
                     f"{worker.returncode}; killed for memory? its words are above); not replacing it again: the "
                     f"node's dispatcher stops, and each rank's reading fails once it has been gone "
                     f"{DISPATCHER_TIMEOUT_S} s\n")
    with _lock:
        _pool[1][1].terminate()


def _spawn(args, ready):
    """Runs `sluice ARGS` until it prints `ready` and its port; its stderr
    goes to this process's."""
    process = subprocess.Popen([_BINARY, *args, "--exit-with", str(os.getpid())], stdout=subprocess.PIPE,
                               text=True)
    for line in process.stdout:
        if line.startswith(ready):
            port = int(line.split()[-1])
            # Its stdout is read for its whole life: a full pipe would block it.
            threading.Thread(target=_forward, args=(process.stdout,), daemon=True).start()
            return process, port
    code = process.wait()
    raise RuntimeError(f"sluice.torch node_pool: `sluice {' '.join(args)}` exited with status {code} before "
                       "listening (its words are above)")


def _forward(stream):
    for line in stream:
        sys.stdout.write(line)


def _stop():
    _stopping.set()
    with _lock:
        pass  # a replacement being started is in _pool now
    _wait_for_the_other_ranks()
    # The worker first: leaving, it tells the dispatcher, which must still listen.
    for process in _pool[1]:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_for_the_other_ranks(patience_s=600):
    """Local rank 0 may end first (no collective at the end): the node's
    other ranks still read from its pool, whose stop failed their epoch.
    It stops once no rank's client is left (a dead rank's is dropped after
    the dispatcher's client timeout), or after `patience_s`. Not when it
    ends on an uncaught exception: the other ranks may wait for it in a
    collective, and its end is what ends the job."""
    if getattr(sys, "last_value", None) is not None:
        sys.stderr.write("sluice.torch node_pool: local rank 0 failed (above); its pool stops now\n")
        return
    front = sys.modules.get("sluice.torch")  # the loaders' module, if any made the pool
    if front is not None:
        front._release_all_engines()  # this rank's own clients
    from sluice import service  # a loader's module, imported by then
    deadline = time.monotonic() + patience_s
    said = False
    while time.monotonic() < deadline:
        try:
            clients = sum(int(job.get("clients", 0)) for job in service.dispatcher_status(_pool[0])["jobs"])
        except Exception:  # noqa: BLE001 (a dispatcher that does not answer serves no one)
            return
        if clients == 0:
            return
        if not said:
            sys.stderr.write(f"sluice.torch node_pool: local rank 0 is done; its pool stops once the node's other "
                             f"ranks are ({clients} clients still reading)\n")
            said = True
        time.sleep(0.2)


def through_pool(definition, dispatcher):
    """`definition` (sharded, as a dict) with a distribute node to
    `dispatcher` right after its batch, or before the first map on a CUDA
    device after it (device maps run in the rank's process)."""
    nodes = definition["nodes"]
    batch = next((i for i, n in enumerate(nodes) if "batch" in n), None)
    if batch is None:
        raise ValueError("sluice.torch node_pool: the pipeline has no batch node; the pool streams each rank's "
                         "batches")
    at = len(nodes)
    for i in range(batch + 1, len(nodes)):
        if nodes[i].get("map", {}).get("device", "cpu") not in ("", "cpu"):
            at = i
            break
    distribute = {"dispatcher": dispatcher, "mode": "parallel_epochs", "dispatcher_timeout_s": DISPATCHER_TIMEOUT_S,
                  "connect_timeout_s": REGISTER_TIMEOUT_S}
    return {**definition, "nodes": nodes[:at] + [{"distribute": distribute}] + nodes[at:]}
