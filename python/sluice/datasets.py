"""Python datasets as sources: a map-style dataset's items made by index in
a pool of Python processes (sluice.from_dataset), or an iterable's items in
order in one process (sluice.from_generator)."""

import atexit
import fcntl
import hashlib
import os
import pickle
import tempfile
import time

import numpy as np

from sluice import _checks, _interpreter, _shipping
from sluice._imports import iterate as _iterate, load as _load
from sluice.pipeline import Pipeline, _Owned

_DTYPES = ("uint8", "int32", "int64", "float32", "float16")


_PREFIX, _SUFFIX = "sluice-dataset-", ".pickle"


def _remove_orphans(directory):
    """Removes the dataset files of processes that died without removing
    them (killed -9): a live one holds a lock on its file. A file under a
    minute old may be one whose writer has not locked (or named) it yet."""
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            if not name.startswith((_PREFIX, "." + _PREFIX)) or time.time() - os.path.getmtime(path) < 60:
                continue
            if name.startswith("."):
                os.unlink(path)  # written by a process killed before it named the file
            elif name.endswith(_SUFFIX):
                _remove_unheld(path)
        except OSError:
            continue  # gone already


def _remove_unheld(path):
    """Removes the dataset file at `path` unless a process holds it (a
    shared lock: this one's other pipelines, or another trainer's of the
    same dataset)."""
    try:
        with open(path, "rb") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _same_file(f, path):
                os.unlink(path)
    except OSError:
        pass  # held, or gone already


def _same_file(f, path):
    """Whether the open file `f` is still the one at `path` (not removed,
    or removed and written again, since it was opened)."""
    try:
        here, there = os.fstat(f.fileno()), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _hold(path, data):
    """The file at `path` holding `data`, written unless there already,
    opened and locked shared (held while the lock is): one file for every
    process that pickles the same dataset."""
    while True:
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            with tempfile.NamedTemporaryFile(dir=os.path.dirname(path), prefix="." + _PREFIX, delete=False) as t:
                t.write(data)
            try:
                os.link(t.name, path)  # whole or not at all, and never over another's
            except FileExistsError:
                pass
            finally:
                os.unlink(t.name)
            continue
        fcntl.flock(f, fcntl.LOCK_SH)
        if _same_file(f, path):
            return f
        f.close()  # removed by its last holder between the open and the lock: again


# Files held by this process's pipelines not yet collected, and by those
# collected after being pickled (until exit): (pid, path, lock).
_HELD = []


@atexit.register
def _remove_written():
    """At exit (and in sluice.torch.exit_rank), the files of pipelines still
    held (a loader in a global): nothing else would remove them, unless
    another process holds the same file."""
    mine = [held for held in _HELD if held[0] == os.getpid()]  # not a forked child's copy of the table
    for held in mine:
        _HELD.remove(held)
        held[2].close()
    for _, path, _ in mine:
        _remove_unheld(path)


class _PickleFile(_Owned):
    """The dataset pickled by value (cloudpickle: its class may be the
    script's or a notebook's) for the processes to load, in a file named by
    its bytes: trainers whose datasets pickle alike (a shared job's
    consumers, the same script run again; not where a class is defined in
    the script, which cloudpickle marks anew in each process) name the same
    file, so a worker's pipeline made for one serves the next. Removed with
    the last pipeline made of it in the last process holding it (once
    pickled, at exit: a child may still load it), or by a later process if
    the holders are killed."""

    path = None  # until the file is written: a dataset that cannot be sent has none

    def __init__(self, dataset, who):
        super().__init__()
        data = _shipping.dumps(dataset, who)
        self.digest = _shipping.identity(dataset)
        directory = tempfile.gettempdir()
        _remove_orphans(directory)
        path = os.path.join(directory, _PREFIX + hashlib.sha256(data).hexdigest()[:32] + _SUFFIX)
        self._lock = _hold(path, data)  # held while this process lives
        self.path = path
        _HELD.append((os.getpid(), path, self._lock))

    def __getstate__(self):
        # Sent to another process (a spawn child, a Ray task), which may
        # outlive this object: the file stays until this process exits.
        self._sent = True
        state = self.__dict__.copy()
        state.pop("_lock", None)
        state.pop("_sent", None)
        return state

    def load(self):
        """A copy of the dataset, as the processes get it."""
        with open(self.path, "rb") as f:
            return pickle.load(f)

    def __del__(self):
        lock = self.__dict__.get("_lock")
        if lock is None or not self._mine() or lock.closed:  # closed: at exit, already
            return
        if self.__dict__.get("_sent"):
            return  # kept locked while this process lives (a child may still load it); removed at exit
        _HELD.remove((os.getpid(), self.path, lock))
        lock.close()
        _remove_unheld(self.path)


def _mixes_ints_and_floats(values):
    """Whether nested tuples or lists hold both integers and floats."""
    kinds = set()
    for v in values:
        if isinstance(v, (tuple, list)):
            kinds |= {"f", "i"} if _mixes_ints_and_floats(v) else {np.asarray(v).dtype.kind}
        else:
            kinds.add(np.asarray(v).dtype.kind)
    return "f" in kinds and bool(kinds & {"i", "u"})


def _column(name, value, images, who):
    """The column the first item's value declares."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"name": name, "dtype": "bytes", "shape": []}
    if value is None:
        raise TypeError(f"{who}: '{name}' is None: each item's values are arrays, numbers or bytes (did the "
                        "function return or yield nothing?)")
    if isinstance(value, str):
        raise TypeError(f"{who}: '{name}' is a str: encode it (s.encode()) to hold it as bytes")
    if isinstance(value, (tuple, list)) and _mixes_ints_and_floats(value):
        raise TypeError(f"{who}: '{name}' is a {type(value).__name__} of integers and floats, which one array "
                        "would hold as floats, losing the integers' digits: give them as values of their own (a "
                        "flat tuple, or a dict), or as a numpy array of the dtype you mean")
    try:
        a = np.asarray(value)
    except (TypeError, RuntimeError, ValueError) as e:  # a bfloat16 tensor, a ragged list
        raise TypeError(f"{who}: '{name}' is no numpy array ({e}); sluice holds {', '.join(_DTYPES)} (float64 and "
                        "bool become float32 and uint8) or bytes: convert it in __getitem__ (a bfloat16 tensor: "
                        ".float())") from e
    if name in images:
        if a.dtype != np.uint8 or a.ndim not in (2, 3) or a.ndim == 3 and a.shape[2] not in (1, 3):
            raise TypeError(f"{who}: '{name}' is {a.dtype}{list(a.shape)}: an image column holds uint8 arrays "
                            "of (height, width), (height, width, 1) or (height, width, 3)")
        return {"name": name, "dtype": "image", "shape": []}  # raw pixels in a netpbm header
    dtype = {"float64": "float32", "bool": "uint8"}.get(a.dtype.name, a.dtype.name)
    if dtype not in _DTYPES:
        raise TypeError(f"{who}: '{name}' is {a.dtype}; sluice holds {', '.join(_DTYPES)} "
                        "(float64 and bool become float32 and uint8) or bytes")
    return {"name": name, "dtype": dtype, "shape": list(a.shape)}


def _columns(item, names, images, who):
    """The columns of items like `item`: a dict, a tuple or a single value."""
    if isinstance(item, dict):
        if names is not None:
            raise ValueError(f"{who}: names= names the values of tuple or single items; a dict item names its "
                             f"columns by its keys {list(item)[:8]}")
        keys = [k for k in item if not isinstance(k, str)]
        if keys:
            raise TypeError(f"{who}: a dict whose keys {keys[:4]} are not strings: columns are named by strings "
                            "(return {str(k): v ...}, or a tuple with names=...)")
        columns = [_column(k, v, images, who) for k, v in item.items()]
    else:
        values = list(item) if isinstance(item, (tuple, list)) else [item]
        labels = list(names) if names is not None else [str(i) for i in range(len(values))]
        if len(labels) != len(values):
            raise ValueError(f"{who}: {len(labels)} names for items of {len(values)} values")
        repeated = sorted({n for n in labels if labels.count(n) > 1})
        if repeated:
            raise ValueError(f"{who}: names repeat {repeated}: each column needs a name of its own")
        columns = [_column(n, v, images, who) for n, v in zip(labels, values)]
    unknown = set(images) - {c["name"] for c in columns}
    if unknown:
        raise ValueError(f"{who}: images names no column {sorted(unknown)}; columns: {[c['name'] for c in columns]}")
    return columns


def _source(target, hold, name, columns, processes, **fields):
    """The python_dataset source node of `target` ("module:function" or the
    pickle in `hold`)."""
    return {"python_dataset": {"dataset": target if hold is None else f"pickle:{hold.path}", "name": name,
                               "columns": columns, "processes": processes,
                               "digest": hold.digest if hold is not None else "", **fields}}


def from_dataset(dataset, *, names=None, images=(), processes=0, split_records=64, shuffle=True):
    """A pipeline reading a map-style dataset: anything with ``__len__`` and
    ``__getitem__`` (a torch ``Dataset`` as it is), its items made by index
    in a pool of `processes` Python processes (0: one per core).

    Items are dicts, or tuples (named `names`, default "0", "1", ...) or
    single values (named `names[0]`, default "0"), of numpy arrays, torch
    tensors, scalars or bytes; dataset[0] fixes each column's dtype and
    shape (float64 and bool become float32 and uint8; bytes may vary in
    length: decode them with the image ops). Columns named in `images` hold
    decoded uint8 images of any size, (H, W) or (H, W, C): they travel as
    raw pixels, which the image ops (decode_random_resized_crop, ...) take
    as they take JPEGs, with nothing to decode. Splits are runs of
    `split_records` places in the epoch; with `shuffle`, as
    DataLoader(shuffle=True), the places are a permutation of all the
    indices drawn anew each epoch from sluice's seed (a dataset sorted by
    class gets batches of every class), and the splits are shuffled too.
    A shuffle op, `distribute` and checkpoints work as on files.
    Sharded by rank right after it (sluice.torch's shard of a pipeline
    without a shuffle or filter op before its batch), each rank's processes
    make only the rank's items (docs/distributed.md).

    The processes get the dataset by value (cloudpickle), its class defined
    anywhere (a module, the script, a notebook); one that cannot be sent (it
    holds a lock or a socket) is a TypeError naming it. Or give
    "module:function", a function returning the dataset, which each
    process calls: what a `distribute`d pipeline's remote workers need. An
    exception in __getitem__ fails the pipeline naming the index, with the
    traceback.
    """
    processes = _checks.whole("processes", processes, 0, _checks.MOST_PROCESSES)
    _interpreter.export()
    hold = None
    if isinstance(dataset, str):
        target, dataset = dataset, _load(dataset)()
    else:
        target, hold = None, _PickleFile(dataset, "from_dataset")
    length = len(dataset)
    if length == 0:
        raise ValueError("from_dataset: the dataset is empty")
    # dataset[0] of a copy: a dataset that opens its file on first use (as
    # h5py and lmdb ones do) would hold it open after, and pickle no more.
    first = (dataset if hold is None else hold.load())[0]
    columns = _columns(first, names, set(images), "from_dataset: dataset[0]")
    source = _source(target, hold, type(dataset).__name__, columns, processes, length=length)
    return Pipeline({"nodes": [{"source": {**source, "split_records": split_records, "shuffle_splits": shuffle}}]},
                    _hold=hold)


def from_generator(generator, *, names=None, images=()):
    """A pipeline reading an iterable's items in order: `generator` is a
    function (or class) whose call returns an iterable, or an iterable that
    can be iterated again (a list, a torch ``IterableDataset``); each epoch
    calls or iterates it anew, in one Python process. Items are as
    from_dataset's, the first fixing the columns.

    An iterator cannot be split: its items are one split of unknown length,
    so a shuffle op shuffles within its buffer only, and `distribute` runs
    it only as "parallel_epochs" (each worker all of it). A resumed
    checkpoint iterates again up to where it was, so it resumes the same
    items only if the iteration repeats itself. For splits, use
    from_dataset. "module:function" names the function by import path, as
    remote workers need.
    """
    _interpreter.export()
    if isinstance(generator, str):
        target, hold, made = generator, None, _load(generator)
    else:
        if hasattr(generator, "__next__") and not isinstance(generator, type):
            raise TypeError("from_generator: an iterator runs once, and each epoch starts anew: give the function "
                            "that makes it (from_generator(make), not from_generator(make()))")
        target, hold, made = None, _PickleFile(generator, "from_generator"), generator
    try:
        first = next(_iterate(made))
    except StopIteration:
        raise ValueError("from_generator: the generator made no items") from None
    columns = _columns(first, names, set(images), "from_generator: its first item")
    name = getattr(made, "__name__", None) or type(made).__name__
    source = _source(target, hold, name, columns, 1, generator=True)
    return Pipeline({"nodes": [{"source": source}]}, _hold=hold)
