"""The data-parallel job a process runs in: its rank and world size, and the
pipeline's shard for it (docs/distributed.md)."""

import copy
import datetime
import hashlib
import os
import sys
import time

from sluice import _checks


def job(rank=None, world_size=None):
    """(rank, world size, where they came from): as given, else from
    torch.distributed when it is initialized, else from torchrun's RANK and
    WORLD_SIZE, else one process."""
    if (rank is None) != (world_size is None):
        raise ValueError("give both rank and world_size, or neither")
    if rank is not None:
        rank, world_size = _checks.whole("rank", rank), _checks.whole("world_size", world_size)
        dist = _dist()
        if dist is None or world_size == dist.get_world_size():
            return _checked(rank, world_size, "given")
        if world_size == 1:
            return _checked(rank, world_size, f"given: a loader of this rank's own, in a process group of "
                                              f"{dist.get_world_size()} ranks; the ranks are not checked against "
                                              "each other")
        return _checked(rank, world_size, f"given; the process group has {dist.get_world_size()} ranks, so the "
                                          "ranks are not checked against each other: leave rank and world_size "
                                          "out for a loader that spans the group")
    dist = _dist()
    if dist is not None:
        return _checked(dist.get_rank(), dist.get_world_size(), "torch.distributed")
    if "WORLD_SIZE" in os.environ:
        if _rank_pending():
            # Lightning's ddp strategy starts its ranks with WORLD_SIZE and
            # LOCAL_RANK, and gives the rank to init_process_group only:
            # the loader takes the job at its first pass (late_job).
            return 0, 1, "one process"
        try:
            rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ["WORLD_SIZE"])
        except ValueError:
            raise ValueError(f"RANK={os.environ.get('RANK')!r} and WORLD_SIZE={os.environ['WORLD_SIZE']!r} "
                             "are not numbers") from None
        return _checked(rank, world_size, "RANK/WORLD_SIZE")
    return 0, 1, "one process"


def late_job():
    """job() at the first pass of a loader made as one process: the process
    group or RANK may have come since."""
    if _dist() is None and _rank_pending():
        raise ValueError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is set but RANK is not, and torch.distributed is "
                         "not initialized (torchrun sets both; LOCAL_RANK is the rank on its node only): set RANK, "
                         "initialize the process group before the first pass, or give rank and world_size")
    return job()


def _rank_pending():
    return "WORLD_SIZE" in os.environ and "RANK" not in os.environ and os.environ["WORLD_SIZE"].strip() != "1"


def _checked(rank, world_size, source):
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} of world size {world_size} ({source}): the rank must be in [0, world_size)")
    return rank, world_size, source


def _dist():
    """torch.distributed when it is initialized, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def sharded(definition, rank, world_size, source):
    """`definition` (a PipelineDef as a dict) for shard `rank` of
    `world_size` (`source`: where job() found them), and a line saying what
    was done: a shard node that takes the job's (num_shards 0) gets this
    one; one with its own shards is kept; with none, in a data-parallel job
    (of any size: one rank then takes the same global batches as N), one
    goes right after the source, so each rank reads and decodes its own
    rows only."""
    definition = copy.deepcopy(definition)
    nodes = definition["nodes"]
    shard = next((n["shard"] for n in nodes if "shard" in n), None)
    if shard is not None and shard.get("num_shards", 0) > 0:
        # One process with shards of its own (its launcher is not torch's) reads the one it names.
        if shard["num_shards"] != world_size and source != "one process":
            ranks = f"{world_size} rank" + ("s" if world_size != 1 else "")
            raise ValueError(f"the pipeline's shard node says {shard['num_shards']} shards but the job has "
                             f"{ranks} ({source}); leave num_shards 0 to take the job's, or give TorchIterable "
                             "the rank and world_size the shards are of")
        return definition, f"its shard {shard.get('index', 0)} of {shard['num_shards']}"
    if shard is not None:
        shard.update({"num_shards": world_size, "index": rank})
        return definition, f"shard {rank} of {world_size} in its shard node"
    if source == "one process":
        return definition, "no shard (one process)"
    # As early as it may go: after the source, or after the last shuffle or
    # filter before the batch (what comes after a shard keeps every row).
    at = 1
    for i, node in enumerate(nodes):
        if "batch" in node:
            break
        if "shuffle" in node or "filter" in node:
            at = i + 1
    after = "the source" if at == 1 else f"nodes[{at - 1}] ({next(iter(nodes[at - 1]))})"
    _check_after_the_shard(nodes, at, after)
    nodes.insert(at, {"shard": {"num_shards": world_size, "index": rank, "uneven": "drop"}})
    return definition, f"shard {rank} of {world_size} after {after} (uneven \"drop\")"


def _check_after_the_shard(nodes, at, after):
    """What follows the shard sluice.torch inserts keeps every rank's
    batches equal in number; a take or a repeat would not."""
    for i in range(at, len(nodes)):
        kind = next(iter(nodes[i]))
        if kind == "distribute" and nodes[i][kind].get("mode", "distributed_epoch") != "parallel_epochs":
            raise ValueError(
                f"sluice.torch shards this pipeline by rank after {after}, and its distribute node (nodes[{i}]) hands "
                "splits to whichever rank asks (mode \"distributed_epoch\"), which cannot give each rank its own "
                "share: give it mode=\"parallel_epochs\" with the batch before it, or use TorchIterable(pipe, "
                "node_pool=True) for one pool per node (docs/distributed.md)")
        if kind not in ("map", "prefetch", "batch", "distribute"):
            raise ValueError(
                f"sluice.torch shards this pipeline by rank after {after}; after that come only maps, prefetches, "
                f"one batch and a distribute node, not a {kind} (nodes[{i}]): every rank must yield as many batches. "
                "Limit an epoch's steps in the loop (itertools.islice(loader, steps)) and repeat epochs with a loop "
                "over them")


_WHY = {"pipeline": " (a source, an op or its attrs differ; so does a Python object the pipeline holds, a Dataset "
                    "or a transform, whose state differs between ranks: an attribute set per rank, such as the rank "
                    "or a path of its own, makes another pipeline)"}


def check_ranks_agree(fingerprint, listing, definition, world_size, resume, epoch):
    """Under torch.distributed, when the loader spans the process group
    (`world_size` is the group's), raises ValueError naming the ranks that
    run different pipelines, seeds or batch sizes, read different files
    (`listing`: a pattern that matches another file on one node), start on
    different epochs (`epoch`: set_epoch), or resume from different states: their batches would differ in number or in samples, and DDP
    would hang or train on a wrong epoch. Every rank of the group must call
    it then (a collective). A loader of its own (another world size: one
    rank evaluating alone) checks nothing."""
    dist = _dist()
    if dist is None or world_size != dist.get_world_size():
        return
    digest = hashlib.sha256(bytes(resume)).hexdigest()[:16] if resume is not None else None
    # A sharded pipeline's fingerprint leaves its batch size out (a state
    # moves between world sizes whose global batch is the same).
    batch = next((node["batch"].get("size") for node in definition["nodes"] if "batch" in node), None)
    shard = next((node["shard"] for node in definition["nodes"] if "shard" in node), {})
    # The fingerprint leaves the uneven mode out too (a state checks it on
    # its own): drop and pad give other step counts.
    # The resumed state before the epoch: a state loaded on some ranks only
    # is what differs then, not the epoch it holds.
    mine = {"world size": world_size, "seed": definition.get("seed", 0), "batch size": batch,
            "uneven mode": shard.get("uneven") or "drop", "pipeline": fingerprint, "files": listing,
            "resumed state": digest or "none (no state loaded)", "epoch": epoch}
    index = shard.get("index", 0) if shard else None
    _wait_for_every_rank(dist, world_size)
    everyone = [None] * dist.get_world_size()
    try:
        dist.all_gather_object(everyone, (mine, index))
    except RuntimeError as e:  # a timeout, or a rank gone after its own timeout
        raise RuntimeError(f"sluice.torch: the ranks' check of this loader failed ({e}). If it waited for ranks "
                           f"that never came: {_EVERY_RANK_ITERATES}") from e
    for what in mine:
        values = {}
        for rank, (theirs, _) in enumerate(everyone):
            values.setdefault(theirs[what], []).append(rank)
        if len(values) > 1:
            detail = "; ".join(f"ranks {ranks}: {value}" for value, ranks in values.items())
            raise ValueError(f"the ranks disagree on the {what}: {detail}" + _WHY.get(what, ""))
    _check_own_shards([theirs_index for _, theirs_index in everyone])


_EVERY_RANK_ITERATES = (
    "every rank of the process group iterates a loader that spans the group, at the same time. A framework that "
    "iterates on rank 0 only and sends the batches on (accelerate's prepare() of a DataLoader around the "
    "TorchIterable, dispatching batches as it does by default) must be given the TorchIterable itself "
    "(docs/distributed.md); a loader one rank iterates alone (evaluation on rank 0) takes rank=0, world_size=1")

_PATIENCE = datetime.timedelta(seconds=60)  # before saying which ranks the first pass waits for
_passes_checked = 0


def _wait_for_every_rank(dist, world_size):
    """Waits, through the process group's store, until every rank's loader
    has come to its check. A rank that never iterates would leave the others
    in the collective after this for the group's whole timeout (30 minutes
    by default), saying nothing, or matched against a collective of another
    kind (the one that sends a framework's batches on): after a minute this
    says which ranks it waits for, and at the store's timeout it fails
    naming them."""
    global _passes_checked
    try:
        store = dist.distributed_c10d._get_default_store()
    except (AttributeError, RuntimeError, ValueError):  # torch's own name for it; the collective still checks
        return
    prefix = f"sluice/loader-check/{_passes_checked}/"
    _passes_checked += 1  # the n-th check of every rank meets the others' n-th
    keys = [f"{prefix}{rank}" for rank in range(world_size)]
    try:
        store.set(keys[dist.get_rank()], b"")
    except RuntimeError as e:
        raise _store_gone(dist, e) from e
    patience = min(_PATIENCE, store.timeout / 2)  # said before a short timeout too
    started = time.monotonic()
    if _all_set(dist, store, keys, patience):
        return
    sys.stderr.write(f"sluice.torch: rank {dist.get_rank()} has waited {patience.total_seconds():g} s for ranks "
                     f"{_absent(store, keys)} to start this loader's first pass: {_EVERY_RANK_ITERATES}\n")
    sys.stderr.flush()
    if not _all_set(dist, store, keys, store.timeout - patience):  # in all, the store's timeout: the group's
        waited = datetime.timedelta(seconds=round(time.monotonic() - started))
        raise RuntimeError(f"sluice.torch: rank {dist.get_rank()}: ranks {_absent(store, keys)} never started this "
                           f"loader's first pass (waited {waited}): {_EVERY_RANK_ITERATES}")


def _all_set(dist, store, keys, timeout):
    """Whether every key was set within `timeout`. A store that stops
    answering is an error saying so: the process that kept it died."""
    try:
        store.wait(keys, timeout)
        return True
    except RuntimeError as e:
        if type(e).__name__ != "DistNetworkError":  # torch's DistStoreError: the timeout
            return False
        raise _store_gone(dist, e) from e


def _store_gone(dist, error):
    return RuntimeError(
        f"sluice.torch: rank {dist.get_rank()}: the process group's store stopped answering as this loader checked "
        "that every rank starts its first pass: the process that kept it (rank 0 when the group was initialized "
        "from MASTER_ADDR and MASTER_PORT, torchrun's agent under torchrun) has died or closed it; see that "
        f"process's output ({str(error).splitlines()[0]})")


def _absent(store, keys):
    try:
        return [rank for rank, key in enumerate(keys) if not store.check([key])]
    except RuntimeError:  # the store is gone with the rank that held it
        return "(unknown: the process group's store does not answer)"


def _check_own_shards(indexes):
    """Each rank reads a shard of its own: a pipeline with its own shard
    node (pipe.shard(n, 0) on every rank) would train every rank on the same
    samples."""
    by_index = {}
    for rank, index in enumerate(indexes):
        by_index.setdefault(index, []).append(rank)
    shared = {index: ranks for index, ranks in by_index.items() if len(ranks) > 1}
    if shared:
        detail = "; ".join(f"ranks {ranks} read shard {index}" for index, ranks in shared.items())
        raise ValueError(f"the ranks read the same shard: {detail}; each rank needs its own (pipe.shard(n, rank), "
                         "or pipe.shard() to take the job's)")
