"""One process of a `python` op's pool, or of a Python dataset's: imports
the user's function (or loads the dataset), then runs it on the rows
sluice's engine puts in shared memory (fd 4), told when over a socket
(fd 3). The layout and protocol are in src/sluice/core/python_process.h;
this is the other end.

    python -m sluice._python_worker SPEC_BYTES   (the spec's JSON: fd 4's first bytes)
"""

import inspect
import json
import mmap
import os
import pickle
import signal
import socket
import struct
import sys
import threading
import time
import traceback

import numpy as np

from sluice import _shipping
from sluice._imports import iterate as _iterate, load as _load

_REQUEST = struct.Struct("<QQqq")
_REPLY = struct.Struct("<qqQq")


def _origin_hint(name):
    """Where a column the user's function may not know of comes from."""
    if name == "is_padding":
        return ("; shard(uneven=\"pad\") added it (1 marks a repeated sample): return it as it came, "
                "sample['is_padding'], or give the op inputs= without it")
    return ""


def _aligned(n):
    return (n + 63) & ~63


def _add_row_layout(columns):
    """Adds each fixed-shape column's numpy dtype and bytes a row."""
    for c in columns:
        if not c["ragged"]:
            c["np_dtype"] = np.dtype(c["dtype"])
            c["row_bytes"] = int(np.prod(c["shape"], dtype=np.int64)) * c["np_dtype"].itemsize


class _Columns:
    """Numpy views of one call's columns in the shared memory."""

    def __init__(self, spec, batched):
        self.inputs = spec["inputs"]
        self.outputs = spec["outputs"]
        _add_row_layout(self.inputs + self.outputs)
        self.batched = batched
        # What each output is checked against: (name, numpy dtype, row shape).
        self.checks = [(c["name"], c["np_dtype"], tuple(c["shape"])) for c in self.outputs]
        self.known = {c["name"] for c in self.inputs + self.outputs}

    def map(self, memory, rows):
        """(seeds, {name: input array or list of row arrays}, {name: output array})"""
        seeds = np.frombuffer(memory, np.uint64, rows, 64)
        at = _aligned(64 + 8 * rows)
        inputs, outputs = {}, {}
        for c in self.inputs:
            if c["ragged"]:
                offsets = np.frombuffer(memory, np.int64, rows + 1, at)
                base = at + 8 * (rows + 1)
                inputs[c["name"]] = [np.frombuffer(memory, np.uint8, int(offsets[r + 1] - offsets[r]),
                                                   base + int(offsets[r])) for r in range(rows)]
                at = _aligned(base + int(offsets[rows]))
            else:
                inputs[c["name"]] = np.ndarray((rows, *c["shape"]), c["np_dtype"], memory, at)
                at = _aligned(at + rows * c["row_bytes"])
        for c in self.outputs:
            outputs[c["name"]] = np.ndarray((rows, *c["shape"]), c["np_dtype"], memory, at)
            at = _aligned(at + rows * c["row_bytes"])
        return seeds, inputs, outputs

    def store(self, result, outputs, row):
        """Checks the function's result against the declared outputs and
        writes it (as row `row`, or the whole batch for None); a wrong one
        raises naming the column and both specs. Runs once a sample: kept
        to plain lookups and one copy a column."""
        if not isinstance(result, dict):
            raise TypeError(f"the function returned {type(result).__name__}, not a dict of arrays")
        if len(result) > len(self.checks):  # an input it passed back is left as it was
            new = [name for name in result if name not in self.known]
            if new:
                raise KeyError(f"the function returned {new}, which its outputs do not declare and would be lost; "
                               f"declare new columns, e.g. outputs={{..., '{new[0]}': (dtype, shape)}}")
        for name, dtype, shape in self.checks:
            if name not in result:
                raise KeyError(f"the function's result has no '{name}' (it has {sorted(result)}); declared: "
                               f"{name}: {dtype}{list(shape)}{_origin_hint(name)}")
            value = result[name]
            if type(value) is not np.ndarray:
                if value is None:
                    raise TypeError(f"output '{name}' is None (the function returned None for it), declared "
                                    f"{dtype}{list(shape)}")
                value = np.asarray(value)
            target = outputs[name]
            expected = shape if row is not None else target.shape
            if value.dtype != dtype or value.shape != expected:
                raise TypeError(f"output '{name}' is {value.dtype}{list(value.shape)}, declared "
                                f"{dtype}{list(expected)}")
            if row is None:
                target[...] = value
            else:
                target[row] = value

    def run(self, fn, rng, memory, rows, header):
        """Runs `fn` on the call's rows (or its batch); header[0] tells the
        engine the row it is on, should the process die there."""
        seeds, inputs, outputs = self.map(memory, rows)
        if self.batched:
            kwargs = {"rng": np.random.default_rng([int(s) for s in seeds])} if rng else {}
            self.store(fn(dict(inputs), **kwargs), outputs, None)
            return
        columns = list(inputs.items())
        for row in range(rows):
            header[0] = row
            sample = {}
            for name, values in columns:
                sample[name] = values[row]
            if rng:
                self.store(fn(sample, rng=np.random.default_rng(int(seeds[row]))), outputs, row)
            else:
                self.store(fn(sample), outputs, row)


def _takes_rng(fn):
    try:
        return "rng" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


_OWN_FILES = os.path.dirname(os.path.abspath(__file__))


def _user_traceback():
    """The exception being handled, less sluice's own frames: what the
    user's code did, once."""
    error = traceback.TracebackException(*sys.exc_info())
    error.stack = traceback.StackSummary.from_list([f for f in error.stack if not f.filename.startswith(_OWN_FILES)])
    return "".join(error.format())


def _reply(sock, code, row=-1, message=""):
    data = message.encode("utf-8", "replace")
    sock.sendall(_REPLY.pack(code, row, len(data), 0) + data)


def _serve(sock, memory_fd, fn, columns, rng):
    memory, mapped = None, 0
    header = None
    while True:
        data = sock.recv(_REQUEST.size, socket.MSG_WAITALL)
        if len(data) < _REQUEST.size:
            return  # the engine closed its end (done, or the trainer died)
        _, size, rows, _ = _REQUEST.unpack(data)
        if size != mapped:
            memory, mapped = mmap.mmap(memory_fd, size), size
            header = np.frombuffer(memory, np.int64, 1, 0)
        try:
            columns.run(fn, rng, memory, rows, header)
        except Exception:  # the user's code: anything it raises is the sample's error
            _reply(sock, 1, -1 if columns.batched else int(header[0]), _user_traceback())
            continue
        _reply(sock, 0)


def _load_function(spec):
    """The op's callable: sent by value (the front's cloudpickle), or
    imported by name."""
    return _shipping.decode(spec["pickled"]) if spec.get("pickled") else _load(spec["function"])


def _load_dataset(target, generator):
    if target.startswith("pickle:"):  # by value (cloudpickle): nothing of the trainer's script runs here
        path = target[len("pickle:"):]
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"the dataset's pickle {path} is not here: a dataset given as an object travels as a file on the "
                "trainer's machine only, kept while the trainer that made the pipeline lives (removed with the "
                "pipeline there if it was never pickled; a shared job runs its first consumer's, which goes when "
                "that consumer exits); for workers on other machines, or a shared job that outlives its first "
                "consumer, give sluice.from_dataset(\"module:function\"), a function returning the dataset, "
                "importable there")
        with open(path, "rb") as f:
            loaded = pickle.load(f)
    else:
        loaded = _load(target)
        if not generator:
            loaded = loaded()  # the function returns the dataset
    return _Iterated(loaded) if generator else loaded


class _End(Exception):
    """The generator has no more items."""


class _Iterated:
    """A generator's items by position. The engine asks in order; a smaller
    position (a new epoch) starts it again, a larger one (a resumed split)
    passes over the items before it."""

    def __init__(self, source):
        self.source, self.it, self.at = source, None, 0

    def __getitem__(self, index):
        if self.it is None or index < self.at:
            self.it, self.at = _iterate(self.source), 0
        try:
            while self.at < index:
                try:
                    next(self.it)
                except StopIteration:
                    raise
                except Exception as e:  # an earlier item's error: say which, not the one asked for
                    raise RuntimeError(f"item {self.at}, passed over to resume at item {index}, failed") from e
                self.at += 1
            item = next(self.it)
        except StopIteration:
            self.it = None
            raise _End() from None
        except BaseException:
            self.it = None  # a generator that raised is closed: start again when asked again
            raise
        self.at += 1
        return item


class _Netpbm:
    """A decoded image as a binary netpbm file (PGM or PPM): raw pixels that
    the image ops read as they read a JPEG (src/sluice/ops/netpbm.h). Kept
    as the array until written: one copy, into the shared memory."""

    def __init__(self, image):
        height, width = image.shape[:2]
        gray = image.ndim == 2 or image.shape[2] == 1
        self.header = b"P%d\n%d %d\n255\n" % (5 if gray else 6, width, height)
        self.image = image

    def __len__(self):
        return len(self.header) + self.image.nbytes

    def write(self, memory, at):
        memory[at:at + len(self.header)] = self.header
        pixels = np.ndarray(self.image.shape, np.uint8, memory, at + len(self.header))
        np.copyto(pixels, self.image)


class _Items:
    """What a dataset's items become: the declared columns, checked."""

    def __init__(self, spec):
        self.columns = spec["outputs"]
        self.names = [c["name"] for c in self.columns]
        self.label = "item {}" if spec.get("generator") else "dataset[{}]"
        _add_row_layout(self.columns)

    def values(self, item, index):
        """The item's values in column order: arrays, or bytes for bytes columns."""
        if item is None:
            raise TypeError(f"{self.label.format(index)} is None: did the function return or yield nothing?")
        if isinstance(item, dict):
            missing = [n for n in self.names if n not in item]
            if missing:
                raise KeyError(f"{self.label.format(index)} has no {missing} (it has {sorted(item)})")
            item = [item[n] for n in self.names]
        elif not isinstance(item, (tuple, list)):
            item = [item]
        if len(item) != len(self.columns):
            raise ValueError(f"{self.label.format(index)} has {len(item)} values, the first had {len(self.columns)}")
        return [self._value(c, v, index) for c, v in zip(self.columns, item)]

    def _value(self, c, v, index):
        if v is None or isinstance(v, str):
            raise TypeError(f"{self.label.format(index)}['{c['name']}'] is "
                            + ("None" if v is None else "a str: encode it (s.encode()) to hold it as bytes"))
        if c["ragged"]:
            if isinstance(v, (bytes, bytearray, memoryview)):
                return bytes(v)
            a = np.asarray(v)
            if c.get("image") and a.dtype == np.uint8 and (a.ndim == 2 or a.ndim == 3 and a.shape[2] in (1, 3)):
                return _Netpbm(a)
            if a.dtype != np.uint8 or a.ndim != 1:
                raise TypeError(f"{self.label.format(index)}['{c['name']}'] is {a.dtype}{list(a.shape)}, declared "
                                + ("an image: uint8 (H, W), (H, W, 1) or (H, W, 3)" if c.get("image") else "bytes"))
            return a.tobytes()
        a = np.asarray(v)
        if a.dtype == np.float64 and c["np_dtype"] == np.float32 or a.dtype == np.bool_:
            a = a.astype(c["np_dtype"])  # Python floats and bools, as from_dataset declared them
        if a.dtype != c["np_dtype"] or list(a.shape) != list(c["shape"]):
            raise TypeError(f"{self.label.format(index)}['{c['name']}'] is {a.dtype}{list(a.shape)}, declared "
                            f"{c['dtype']}{list(c['shape'])} (as the first): items must agree, or give bytes"
                            + _varying_hint(c["name"], a))
        return a


def _varying_hint(name, a):
    """What to do with a column whose values vary in shape."""
    if a.dtype == np.uint8 and (a.ndim == 2 or a.ndim == 3 and a.shape[2] in (1, 3)):
        return f" (images of varying sizes: from_dataset(..., images=[{name!r}]), then a decode op)"
    if a.ndim == 1:
        return " (values of varying length, token ids say: pad them to one length in __getitem__, or give bytes)"
    return ""


def _serve_dataset(sock, memory_fd, dataset, items):
    memory, mapped, kept = None, 0, None
    while True:
        data = sock.recv(_REQUEST.size, socket.MSG_WAITALL)
        if len(data) < _REQUEST.size:
            return
        _, size, rows, _ = _REQUEST.unpack(data)
        if size != mapped:
            memory, mapped = mmap.mmap(memory_fd, size), size
        header = np.frombuffer(memory, np.int64, 1, 0)
        indices = [int(i) for i in np.frombuffer(memory, np.int64, rows, 64)]
        if kept is not None and kept[0] == indices:
            made = kept[1]  # the same request again, with more memory
            header[0] = -1
        else:
            made, row = [], -1
            try:
                for row, index in enumerate(indices):
                    header[0] = row
                    made.append(items.values(dataset[index], index))
            except _End:
                pass  # fewer rows made: the engine ends the split
            except Exception:
                _reply(sock, 1, row, _user_traceback())
                continue
        at = _aligned(64 + 8 * rows)
        dense = []
        for c in items.columns:
            dense.append(at)
            if not c["ragged"]:
                at = _aligned(at + rows * c["row_bytes"])
        needed = at
        for k, c in enumerate(items.columns):
            if c["ragged"]:
                needed = _aligned(needed + 8 * (rows + 1) + sum(len(m[k]) for m in made))
        if needed > mapped:
            kept = (indices, made)
            _reply(sock, 2, needed)
            continue
        kept = None
        ragged_at = at
        for k, c in enumerate(items.columns):
            if not c["ragged"]:
                out = np.ndarray((rows, *c["shape"]), c["np_dtype"], memory, dense[k])
                for r, m in enumerate(made):
                    out[r] = m[k]
                continue
            offsets = np.ndarray(rows + 1, np.int64, memory, ragged_at)
            base = ragged_at + 8 * (rows + 1)
            offsets[:] = 0
            for r, m in enumerate(made):
                offsets[r + 1] = offsets[r] + len(m[k])
                if isinstance(m[k], _Netpbm):
                    m[k].write(memory, base + int(offsets[r]))
                else:
                    memory[base + int(offsets[r]):base + int(offsets[r + 1])] = m[k]
            ragged_at = _aligned(base + int(offsets[len(made)]))
        np.frombuffer(memory, np.int64, 2, 0)[1] = len(made)
        _reply(sock, 0)


def _die_with_the_engine():
    """Exits when the engine's process dies, even while the user's code
    runs (the socket's end is seen only between calls). A watch on the
    parent, not the kernel's parent-death signal: that fires when the
    engine's thread that started this process ends, which threads of an
    epoch do."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _seed_global_generators():
    """Distinct global random state in each process, as DataLoader gives its
    workers: without it every spawned process draws the same numbers from
    random, numpy.random and torch. (ops.python's `rng` is the
    deterministic way.)"""
    import random
    seed = int.from_bytes(os.urandom(8), "little")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def _restore_stderr():
    """Until here fd 2 was a file the engine reads should this process die
    early (its error then says why); from here on it is the caller's."""
    fd = os.environ.pop("SLUICE_STDERR_FD", None)
    if fd is None or not os.readlink("/proc/self/fd/2").startswith("/memfd:sluice-python-stderr"):
        return
    sys.stderr.flush()
    early = os.pread(2, 1 << 20, 0)  # warnings of the imports: the caller sees them still
    os.ftruncate(2, 0)  # a later death must not show them as its cause
    os.dup2(int(fd), 2)
    os.close(int(fd))
    try:
        sys.stderr.buffer.write(early)
        sys.stderr.flush()
    except OSError:
        pass  # the caller's stderr is closed: nothing to show them on


def main():
    _restore_stderr()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trainer handles Ctrl-C and stops this process
    _die_with_the_engine()
    for fd in (3, 4):
        os.set_inheritable(fd, False)  # a subprocess of the user's code must not hold them
    # The spec is at the start of the shared memory (it may hold a callable
    # too large for a command line); argv says its length.
    spec = json.loads(os.pread(4, int(sys.argv[1]), 0))
    sock = socket.socket(fileno=3)
    dataset = spec.get("kind") == "dataset"
    try:
        if dataset:
            loaded, work = _load_dataset(spec["dataset"], spec.get("generator")), _Items(spec)
        else:
            loaded, work = _load_function(spec), _Columns(spec, spec["batched"])
    except BaseException:  # an import runs the user's module: report whatever it raises
        try:
            _reply(sock, 1, -1, f"cannot load {spec['dataset' if dataset else 'function']} in {sys.executable}:\n"
                                f"{_user_traceback()}")
        except BrokenPipeError:
            pass  # the engine is gone already
        return
    _seed_global_generators()
    try:
        _reply(sock, 0)
        if dataset:
            _serve_dataset(sock, 4, loaded, work)
        else:
            _serve(sock, 4, loaded, work, spec["rng"] or _takes_rng(loaded))  # the attr, or a named function's own
    except (BrokenPipeError, ConnectionResetError):
        pass  # the engine closed its end mid-call (stopped, Ctrl-C): no one is left to answer


if __name__ == "__main__":
    main()
