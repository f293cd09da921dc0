"""One process of a `python` op's pool: imports the user's function, then
runs it on the rows sluice's engine puts in shared memory (fd 4), told
when over a socket (fd 3). The layout and protocol are in
src/sluice/ops/python_process.h; this is the other end.

    python -m sluice._python_worker SPEC_JSON
"""

import importlib
import json
import mmap
import os
import runpy
import signal
import socket
import struct
import sys
import traceback

import numpy as np

_REQUEST = struct.Struct("<QQqq")
_REPLY = struct.Struct("<qqQq")


def _aligned(n):
    return (n + 63) & ~63


def _load(function):
    """The function named 'module.sub:fn' or '/path/script.py:fn'; a script
    runs as a module of its own (its `if __name__ == "__main__":` block
    does not)."""
    where, _, name = function.rpartition(":")
    if where.endswith(".py"):
        namespace = runpy.run_path(where, run_name="__sluice_main__")
        target = namespace.get(name.split(".")[0])
        rest = name.split(".")[1:]
    else:
        target, rest = importlib.import_module(where), name.split(".")
    for part in rest:
        target = getattr(target, part)
    if target is None:
        raise AttributeError(f"{where} has no {name}")
    return target


class _Columns:
    """Numpy views of one call's columns in the shared memory."""

    def __init__(self, spec, batched):
        self.inputs = spec["inputs"]
        self.outputs = spec["outputs"]
        for c in self.inputs + self.outputs:
            if not c["ragged"]:
                c["np_dtype"] = np.dtype(c["dtype"])
                c["row_bytes"] = int(np.prod(c["shape"], dtype=np.int64)) * c["np_dtype"].itemsize
        self.batched = batched

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
        writes it; a wrong one raises naming the column and both specs."""
        if not isinstance(result, dict):
            raise TypeError(f"the function returned {type(result).__name__}, not a dict of arrays")
        for c in self.outputs:
            name = c["name"]
            if name not in result:
                raise KeyError(f"the function's result has no '{name}' (it has {sorted(result)}); declared: "
                               f"{name}: {c['dtype']}{list(c['shape'])}")
            value = np.asarray(result[name])
            # A slice, so that a scalar column's row is a view too.
            target = outputs[name] if row is None else outputs[name][row:row + 1].reshape(c["shape"])
            if value.dtype != c["np_dtype"] or value.shape != target.shape:
                raise TypeError(f"output '{name}' is {value.dtype}{list(value.shape)}, declared "
                                f"{c['dtype']}{list(target.shape)}")
            target[...] = value


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
        seeds, inputs, outputs = columns.map(memory, rows)
        row = -1
        try:
            if columns.batched:
                kwargs = {"rng": np.random.default_rng([int(s) for s in seeds])} if rng else {}
                columns.store(fn(dict(inputs), **kwargs), outputs, None)
            else:
                for row in range(rows):
                    header[0] = row
                    sample = {name: value[row] for name, value in inputs.items()}
                    kwargs = {"rng": np.random.default_rng(int(seeds[row]))} if rng else {}
                    columns.store(fn(sample, **kwargs), outputs, row)
        except Exception:  # the user's code: anything it raises is the sample's error
            _reply(sock, 1, row, traceback.format_exc())
            continue
        _reply(sock, 0)


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trainer handles Ctrl-C and stops this process
    spec = json.loads(sys.argv[1])
    sys.path[:0] = [p for p in os.environ.get("SLUICE_PYTHONPATH", "").split(os.pathsep) if p]
    sock = socket.socket(fileno=3)
    try:
        fn = _load(spec["function"])
        columns = _Columns(spec, spec["batched"])
    except BaseException:  # an import runs the user's module: report whatever it raises
        _reply(sock, 1, -1, f"cannot load {spec['function']}:\n{traceback.format_exc()}")
        return
    _reply(sock, 0)
    _serve(sock, 4, fn, columns, spec["rng"])


if __name__ == "__main__":
    main()
