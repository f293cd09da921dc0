"""PyTorch adapter: a pipeline's batches as dicts of torch tensors that share
sluice's buffers (DLPack, no copy).

The three-line swap in a training loop::

    loader = sluice.torch.TorchIterable(pipeline)        # instead of DataLoader(...)
    for batch in loader:
        images, labels = batch["image"], batch["label"]

It is an IterableDataset, so ``torch.utils.data.DataLoader(loader,
batch_size=None)`` works too (batching and parallelism stay in sluice: keep
num_workers=0).
"""

import atexit
import contextlib
import gc
import os
import sys
import time
import warnings
import weakref

import torch
import torch.utils.data

from sluice import _checks, _distributed, _node_pool, _sluice
from sluice.pipeline import Pipeline


class TorchIterable(torch.utils.data.IterableDataset):
    """Iterates `pipeline` (a sluice.Pipeline) as dicts of torch tensors.

    Each pass is a new epoch unless `set_epoch` chose one. `samples` counts
    the samples delivered so far, over all passes (this rank's; a state
    loaded on another number of ranks brings its share of the job's). `consumer_rate` is the
    trainer's own speed in samples/s, measured from the time the loop spent
    between batches (outside sluice): what ``pipeline.profile(
    consumer_rate=...)`` compares the pipeline with.

    `pin_memory=True` hands out tensors in page-locked memory, so that
    ``.to("cuda", non_blocking=True)`` overlaps the copy with compute (one
    host copy per batch, as DataLoader's pin_memory). Without a CUDA device
    it warns once and yields ordinary tensors, as DataLoader does.

    A pipeline with maps on device "cuda" yields CUDA tensors straight from
    sluice's device memory (no copy): on torch's current device, or on
    `device` (e.g. "cuda:1"). torch's current stream waits for sluice's
    kernels (DLPack's stream protocol), so the loop needs no synchronization.
    `device` is for those maps only: anything but a CUDA device is refused,
    and a pipeline without them warns that its batches stay on the CPU.

    Data-parallel jobs (``torchrun``, DDP): each rank gets its exact share of
    every epoch, every rank the same number of batches (``len(loader)`` is
    equal on all), and a step's global batch is the same samples whatever
    the number of ranks (docs/distributed.md). The rank and world size come
    from torch.distributed when it is initialized, else from torchrun's
    RANK and WORLD_SIZE, unless `rank` and `world_size` are given (a loader
    made before the process group, or with WORLD_SIZE but no RANK yet as
    Lightning starts its ranks, takes them at its first pass); the
    pipeline's batch is each rank's. A pipeline without a shard node gets
    one right after its source; one whose shard node leaves the count to
    the job (``pipe.shard()``) gets this rank's. What it took is said in one
    line on stderr (`quiet=True` keeps it silent). Under torch.distributed,
    a loader whose world size is the process group's checks at its first
    pass (a collective: every rank's loader takes that pass) that the ranks
    run the same pipeline, seed and batch size and resume from the same
    state, and fails naming the ranks that differ rather than hang. A loader
    of one rank's own (``rank=0, world_size=1``: an evaluation on rank 0)
    checks nothing with the others.

    `node_pool=True` (under torch.distributed) runs every rank's pipeline up
    to its batch in one set of processes per node, sized to the node's
    cores, rather than in a thread pool per rank: local rank 0 starts them,
    each rank reads its shard's batches through shared memory
    (docs/distributed.md). The batches, the states and the checks are the
    same as in-process.
    """

    def __init__(self, pipeline, *, pin_memory=False, device=None, rank=None, world_size=None, quiet=False,
                 node_pool=False):
        super().__init__()
        if not isinstance(pipeline, Pipeline):
            raise TypeError(f"TorchIterable takes a sluice.Pipeline, got {type(pipeline).__name__} "
                            "(sluice.from_dataset(ds) reads a torch Dataset, sluice.Pipeline.from_json(text) a "
                            "pipeline's JSON)")
        self._given = pipeline
        _check_device(device, pipeline)
        self._options = {"device": device, "quiet": quiet, "node_pool": node_pool}
        self._bind(*_distributed.job(rank, world_size))
        self._epoch = 0
        self._pin = pin_memory and torch.cuda.is_available()
        if pin_memory and not self._pin:
            warnings.warn("sluice.torch: pin_memory=True but no CUDA device is available; "
                          "batches stay in pageable memory", stacklevel=2)
        self.samples = 0
        self._loaded_samples = None  # the saving job's, all ranks', from load_state_dict
        self._consumer_seconds = 0.0
        self._consumed = 0
        self._it = None      # the engine iterator of the pass in progress
        self._passes = weakref.WeakSet()  # the passes' generators, which hold their engine iterators
        self._resume = None  # a loaded position: the next pass goes on from it
        self._then_epoch = None  # set_epoch's of the epoch after _resume's: taken if that had ended
        _loaders.add(self)

    def __getstate__(self):
        """Pickles (spawn, deepcopy) without the engine iterator of a pass
        left mid-way, which does not pickle: the copy's next pass is what
        this loader's would be, a new epoch (or a loaded state's)."""
        state = self.__dict__.copy()
        state["_it"] = None
        del state["_passes"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._passes = weakref.WeakSet()

    def _release_engines(self):
        """Drops the engines this loader made (their threads, a pool's
        client and its shared-memory rings): exit_rank's, for a loader that
        outlives the job in a global, or one whose loop called it mid-pass."""
        self._it = None
        for batches in list(self._passes):  # a pass left mid-way holds its iterator (a pool's client)
            try:
                batches.close()
            except ValueError:
                pass  # running in a prefetch thread: it ends with its pass
        for pipeline in (self._pipeline, self._sized):
            pipeline._engine = None

    def _bind(self, rank, world_size, source):
        """Runs the given pipeline as rank `rank` of `world_size` (found in
        `source`): its shard, and the node's pool where asked."""
        self.rank, self.world_size, self._source = rank, world_size, source
        pipeline = self._given
        definition, how = _distributed.sharded(pipeline._def, rank, world_size, source)
        if definition != pipeline._def:
            pipeline = type(pipeline)(definition, pipeline._hold)
        # Its length: the pool's pipeline reads batches from a dispatcher,
        # whose count it cannot know; the same pipeline in-process does.
        self._sized = pipeline
        if self._options["node_pool"]:
            dist = _distributed._dist()
            if dist is None:
                raise ValueError("sluice.torch: node_pool=True needs torch.distributed initialized (the node's ranks "
                                 "share the pool's address through it)")
            if world_size != dist.get_world_size():
                raise ValueError(f"sluice.torch: node_pool=True serves the loaders that span the process group; this "
                                 f"one is rank {rank} of {world_size} of its own (an evaluation): leave "
                                 "node_pool out (starting the pool is a collective every rank would have to join)")
            dispatcher = _node_pool.address(dist)
            pipeline = type(pipeline)(_node_pool.through_pool(definition, dispatcher), pipeline._hold)
            how += f"; through the node's pool (dispatcher {dispatcher})"
        if not self._options["quiet"] and source != "one process":
            # One write: the ranks' lines must not run into each other.
            sys.stderr.write(f"sluice.torch: rank {rank} of {world_size} ({source}): {how}\n")
            sys.stderr.flush()
        self._pipeline = pipeline
        self._checked = False
        if _uses_cuda(pipeline):
            if not torch.cuda.is_available():
                pipeline.engine  # noqa: B018 (sluice's own error where its build or machine has no cuda backend)
                raise RuntimeError("sluice.torch: the pipeline's maps on device \"cuda\" make CUDA tensors, but this "
                                   "torch has no CUDA device (torch.cuda.is_available() is False): install a CUDA "
                                   "build of torch, or run those maps on the CPU (leave device=\"cuda\" out)")
            # The engine's device maps run on the device current when it is made.
            device = self._options["device"]
            with torch.cuda.device(torch.device(device) if device is not None else torch.cuda.current_device()):
                pipeline.engine  # noqa: B018 (made here, on that device)

    def _bind_late_process_group(self):
        """A loader made before init_process_group (or before its launcher
        set RANK) took the job for one process: every rank would train on
        the whole epoch. It takes the job's ranks at its first pass instead."""
        if self._source != "one process":
            return
        rank, world_size, source = _distributed.late_job()
        if world_size == 1:
            return
        self._bind(rank, world_size, "torch.distributed, initialized after this loader was made"
                   if source == "torch.distributed" else f"{source}, set after this loader was made")
        if self._loaded_samples is not None:  # a state loaded before: divided among the group's ranks
            self.samples = self._loaded_samples // self.world_size

    @property
    def pipeline(self):
        """The pipeline this loader iterates: the one given, with this rank's
        shard (and the node's pool) where the job added them. Its
        ``memory()``, ``placement()`` and ``profile()`` are the running
        engine's; the pipeline given to the loader is another engine."""
        return self._pipeline

    @property
    def consumer_rate(self):
        """Samples/s the loop consumed, counting only its own time (None before two batches)."""
        if self._consumer_seconds <= 0:
            return None
        return self._consumed / self._consumer_seconds

    def __len__(self):
        """Batches per epoch, when known (see sluice.Pipeline.__len__)."""
        with self._naming_the_rank():
            self._bind_late_process_group()
            return len(self._sized)

    @contextlib.contextmanager
    def _naming_the_rank(self):
        """sluice's errors within say which rank raised them: launchers other
        than torchrun prefix no rank to a rank's output."""
        try:
            yield
        except Exception as e:  # not `except _sluice.SluiceError`: a generator closed at exit finds _sluice None
            if self.world_size > 1 and isinstance(e, _sluice.SluiceError):
                e.args = (f"rank {self.rank} of {self.world_size}: {e}",)
            raise

    def set_epoch(self, epoch):
        """Makes the next pass epoch `epoch` (as DistributedSampler.set_epoch).
        With a loaded state pending, the next pass resumes the state's epoch;
        the epoch after it is taken when that pass had handed out its last
        batch (a checkpoint at an epoch's last step), and the pass raises
        ValueError when it had not; another epoch raises ValueError here.
        Neither skips what the state's epoch had left."""
        epoch = _checks.whole("epoch", epoch, minimum=0)
        if self._resume is not None:
            saved_in = _sluice.state_epoch(bytes(self._resume))
            if saved_in is not None:
                if epoch not in (saved_in, saved_in + 1):
                    raise _skipping(epoch, saved_in)
                # Whether the resumed pass has batches left is known once
                # it runs, after the ranks checked they resume alike.
                self._then_epoch = epoch if epoch == saved_in + 1 else None
                return  # the resumed pass is that epoch; the next one follows it
        self._epoch = epoch

    def _past_an_ended_pass(self, resumed):
        """The pass of the epoch set_epoch asked for after the loaded
        state's, whose resumed pass must have had no batch left."""
        epoch, self._then_epoch = self._then_epoch, None
        try:
            resumed.next_dlpack()
        except StopIteration:
            self._epoch = epoch + 1
            return self._pipeline.engine.iterate(epoch)
        raise _skipping(epoch, epoch - 1)

    def state_dict(self):
        """Where the data stands, for a checkpoint (``torch.save`` of a dict
        holding it beside the model's): the position in the pass in
        progress (about 120 bytes, see docs/checkpoint.md), the next
        epoch, and `samples`. Take it between steps, after the batch the
        model last trained on. In a data-parallel job every rank's is the
        same (the global batches done): save rank 0's, and load it on every
        rank of a job of any size with the same global batch."""
        position = self._it.state() if self._it is not None else self._resume
        return {"position": position, "next_epoch": self._epoch, "samples": self.samples,
                "world_size": self.world_size}

    def load_state_dict(self, state):
        """Restores a `state_dict()`: the next pass yields exactly the
        batches the saving loader had not yet handed out (with another
        thread count too), then epochs go on from there. Loading applies to
        the next ``iter()``, whatever came before it, and loading twice is
        the same as once."""
        if not isinstance(state, dict) or "position" not in state or "next_epoch" not in state:
            raise TypeError("load_state_dict takes what a TorchIterable's state_dict() returned: a dict with "
                            f"'position' and 'next_epoch', got {type(state).__name__}"
                            + (f" with keys {sorted(state)}" if isinstance(state, dict) else ""))
        position = state["position"]
        if position is not None and not isinstance(position, (bytes, bytearray)):
            raise TypeError(f"load_state_dict: the state's 'position' must be the bytes state_dict() saved (or "
                            f"None), got {type(position).__name__}")
        self._epoch = _checks.whole("load_state_dict: the state's 'next_epoch'", state["next_epoch"], minimum=0)
        self._resume = position
        self._then_epoch = None
        self._checked = False  # the ranks check they resume alike
        # The saving job's samples, divided among this job's ranks.
        self._loaded_samples = state.get("samples", 0) * state.get("world_size", self.world_size)
        self.samples = self._loaded_samples // self.world_size

    def __iter__(self):
        if torch.utils.data.get_worker_info() is not None:
            raise RuntimeError("sluice.torch.TorchIterable is iterated in a DataLoader worker: each worker would "
                               "deliver the whole epoch. sluice runs its own threads; give the DataLoader "
                               "num_workers=0 (and batch_size=None)")
        with self._naming_the_rank():
            if not self._checked:
                self._bind_late_process_group()
                engine = self._pipeline.engine
                _distributed.check_ranks_agree(engine.fingerprint, engine.listing, self._pipeline._def,
                                               self.world_size, self._resume, self._epoch)
                del engine  # this frame lives as long as the pass: _release_engines must be able to drop it
                self._checked = True
            batches = self._batches()
            self._passes.add(batches)
            yield from batches

    def _batches(self):
        """The pass's batches, as dicts of torch tensors."""
        if self._resume is not None:
            it = self._pipeline.engine.resume(bytes(self._resume))
            if self._then_epoch is not None:
                it = self._past_an_ended_pass(it)
            self._resume = None
        else:
            epoch = self._epoch
            self._epoch += 1
            it = self._pipeline.engine.iterate(epoch)
        self._it = it
        batched = self._pipeline.engine.batched
        while True:
            try:
                capsules = it.next_dlpack()
            except StopIteration:
                if self._it is it:  # not a newer pass's (an older one a prefetch thread drained late)
                    self._it = None
                return
            # Device columns come as DLPack producers: torch passes its
            # current stream, which then waits for sluice's kernels.
            batch = {name: _each(c, torch.from_dlpack) for name, c in capsules.items()}
            if self._pin:
                batch = {name: _each(t, torch.Tensor.pin_memory) for name, t in batch.items()}
            rows = len(next(iter(batch.values()))) if batched else 1  # a sample's arrays have no rows
            self.samples += rows
            handed = time.perf_counter()
            yield batch
            # The loop's step on this batch: the time until it asks again.
            self._consumer_seconds += time.perf_counter() - handed
            self._consumed += rows


def _skipping(epoch, saved_in):
    return ValueError(
        f"set_epoch({epoch}) with a loaded state of epoch {saved_in} pending: the next pass resumes epoch "
        f"{saved_in} with the batches it had left, then epoch {saved_in + 1} follows (set_epoch({saved_in + 1}) "
        f"is taken only when it had none left: a state saved at its epoch's last step). Start the loop at the "
        f"state's epoch (state['next_epoch'] - 1 when its position is set), or call set_epoch({saved_in})")


# The loaders alive in this process, for exit_rank to release.
_loaders = weakref.WeakSet()


def _release_all_engines():
    """Drops the engines of every loader of this process (their threads,
    a node pool's clients and their rings), the loaders kept."""
    for loader in list(_loaders):
        loader._release_engines()


def exit_rank():
    """Ends this rank's process with status 0 once its work is saved: for
    the last line of a DDP script, after the function that trained (its
    loader and model local to it) returned.

    Every loader's engines are released (their threads, a node pool's
    client and its shared-memory rings; a loader still held in a global
    too) and what the job dropped is collected,
    the process group is destroyed where one is initialized, atexit
    handlers run (a node pool's processes stop), then the process exits
    without finalizing the interpreter. Finalizing it can abort a gloo rank
    ("terminate called without an active exception", pytorch/pytorch#190489):
    gloo's worker threads may still be freeing the last collective's
    tensors, which takes the GIL, and DDP keeps the process group alive past
    destroy_process_group(). That aborted 1 two-rank job in 10 to 40 here.
    """
    _release_all_engines()
    gc.collect()
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    atexit._run_exitfuncs()  # what os._exit skips
    _sluice.remove_this_processs_rings()  # a loader left in a global keeps its rings past gc
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _each(column, fn):
    """fn of a column, or of each sample's tensor of a batch's bytes column (a list)."""
    return [fn(x) for x in column] if isinstance(column, list) else fn(column)


def _check_device(device, pipeline):
    """`device` is a CUDA device, and says so where it does nothing."""
    if device is None:
        return
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        kind = None
    if kind != "cuda":
        raise ValueError(f"sluice.torch: device must be a CUDA device (\"cuda\", \"cuda:1\"), the one a pipeline's "
                         f"maps on device \"cuda\" run on; got {device!r} (batches of maps on the CPU are CPU "
                         "tensors: leave device out)")
    if not _uses_cuda(pipeline):
        warnings.warn(f"sluice.torch: device={device!r} places the batches of maps on device \"cuda\", and this "
                      "pipeline has none: its batches are CPU tensors (move them with .to(device, non_blocking=True); "
                      "pin_memory=True overlaps that copy)", stacklevel=3)


def _uses_cuda(pipeline):
    return any(node.get("map", {}).get("device") == "cuda" for node in pipeline._def["nodes"])
