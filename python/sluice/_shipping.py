"""Sending the user's callables and datasets to sluice's Python processes
by value, with cloudpickle (as Ray, Dask and joblib do): functions,
lambdas, closures, functools.partial, callable objects (torchvision and
albumentations transforms), bound methods and classes, wherever they were
defined (a module, the running script, `python -`, a notebook). The
processes never run the user's script: it has no main guard to need.

Each shipped object also gets a stable identity for the pipeline's
fingerprint (a saved state names the pipeline it came from): the digest of
its plain pickle (by reference for what is importable, with the state of
objects), made the same in every process: sets in a sorted order (string
hashes differ between processes), tensors as dtype, shape and bytes
(torch's pickle carries a random id), and functions that are not
importable (lambdas, closures) as their code without its line numbers
(a comment added above one is no other pipeline) and their defaults,
not the values they read. What even that cannot pickle is named by its
qualified name.
cloudpickle's own bytes are no identity: classes defined in `__main__`
carry a random tracker id.

A numpy memmap goes by reference (its file, offset, dtype and shape), as a
forked process would share its pages: pickled by value, a 200 MB token
file a function or dataset held was copied into the pipeline and into
each process.
"""

import base64
import hashlib
import importlib
import io
import mmap
import os
import pickle
import sys
import types

_PREFIX = "cloudpickle:"


def dumps(obj, who):
    """cloudpickle's bytes of `obj`; TypeError naming it and the reason
    when it cannot be sent (it holds a lock, a socket, a file open for writing...)."""
    try:
        import cloudpickle  # here, not at the top: a process that only loads needs no cloudpickle to import this
    except ImportError as e:
        raise ImportError(f"{who} sends Python code to sluice's processes with cloudpickle, which this Python "
                          "cannot import: pip install cloudpickle (docs/python.md)") from e

    # A script that multiprocessing's spawn runs again in its children
    # (torch.multiprocessing.spawn) is the module __mp_main__ there: sent by
    # value, as __main__ is (by reference, the processes would import a
    # module of that name, which they have not).
    spawned_main = sys.modules.get("__mp_main__")
    if spawned_main is not None and spawned_main.__name__ == "__mp_main__":
        cloudpickle.register_pickle_by_value(spawned_main)

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj):
            name = _module_subclass_name(obj)
            if name is not None:
                return importlib.import_module, (name,)
            mapped = _memmap_reference(obj)
            if mapped is not None:
                return _open_memmap, mapped
            return super().reducer_override(obj)

    try:
        out = io.BytesIO()
        Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        return out.getvalue()
    except Exception as e:  # noqa: BLE001 (whatever the pickler raises is the reason)
        where = _culprit(obj, lambda o: Pickler(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL).dump(o))
        held = f" (it is {where[0].removeprefix(' → ')}: {_describe(where[1])})" if where else ""
        raise TypeError(f"{who}: {_describe(obj)} cannot be sent to sluice's Python processes: "
                        f"{type(e).__name__}: {e}{held}") from None


def _culprit(obj, dump, depth=4):
    """(path, value) of the first value reachable from `obj` (a function's
    closure, globals and defaults, an object's attributes, a container's
    items) that `dump` fails on and whose own parts do not: the lock or
    socket deep in a transform object, not the object itself. None when no
    part fails alone."""
    for name, part in _parts(obj):
        try:
            dump(part)
        except Exception:  # noqa: BLE001 (any failure marks the part)
            deeper = _culprit(part, dump, depth - 1) if depth > 1 else None
            return (f"{name}{deeper[0]}", deeper[1]) if deeper else (name, part)
    return None


def _parts(obj):
    """(name, value) of what pickling `obj` pickles with it, as far as it
    can be told; at most 200."""
    if isinstance(obj, types.FunctionType):
        import inspect
        try:
            found = inspect.getclosurevars(obj)
        except (TypeError, ValueError):
            return []
        named = [(f" → {obj.__name__}'s variable {k!r}", v) for k, v in found.nonlocals.items()]
        named += [(f" → {obj.__name__}'s global {k!r}", v) for k, v in found.globals.items()
                  if not isinstance(v, types.ModuleType)]
        named += [(f" → {obj.__name__}'s default {i}", v) for i, v in enumerate(obj.__defaults__ or ())]
    elif isinstance(obj, dict):
        named = [(f"[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        named = [(f"[{i}]", v) for i, v in enumerate(obj)]
    elif isinstance(obj, types.MethodType):
        named = [(".__self__", obj.__self__), (".__func__", obj.__func__)]
    elif hasattr(obj, "__dict__") and not isinstance(obj, (type, types.ModuleType)):
        named = [(f".{k}", v) for k, v in vars(obj).items()]
    else:
        named = []
    return named[:200]


def _memmap_reference(obj):
    """The arguments of _open_memmap that map what the numpy memmap `obj`
    (or a contiguous slice of one) views, or None: not a memmap, or one
    that is no contiguous stretch of its file."""
    np = sys.modules.get("numpy")
    if np is None or not isinstance(obj, np.memmap) or obj.size == 0 or not obj.flags.c_contiguous:
        return None
    mapping, filename = getattr(obj, "_mmap", None), getattr(obj, "filename", None)
    if mapping is None or filename is None or mapping.closed:
        return None
    # numpy maps from the offset rounded down to the allocation granularity.
    mapped_from = obj.offset - obj.offset % mmap.ALLOCATIONGRANULARITY
    at = mapped_from + obj.ctypes.data - np.frombuffer(mapping, np.uint8).ctypes.data
    try:
        size = os.path.getsize(filename)
    except OSError:
        return None  # unlinked since it was mapped: by value
    # A process's writes stay its own, as a pickled copy's would.
    return filename, size, obj.dtype, "r" if obj.mode == "r" else "c", at, obj.shape


def _open_memmap(filename, size, dtype, mode, offset, shape):
    """The memmap, mapped again; an error naming the file where it is not
    the one mapped (a service worker on another machine needs it at the same
    path, as it needs a source's files)."""
    import numpy as np
    try:
        found = os.path.getsize(filename)
    except OSError as e:
        raise FileNotFoundError(f"a numpy memmap of {filename} travels by its path, which this process cannot "
                                f"open ({e}): give it the file at the same path, or open the memmap inside the "
                                "function or dataset") from None
    if found != size:
        raise ValueError(f"a numpy memmap of {filename} ({size} bytes) travels by its path, but the file there "
                         f"has {found} bytes: it changed, or this machine has another file at that path")
    return np.memmap(filename, dtype=dtype, mode=mode, offset=offset, shape=shape)


def _module_subclass_name(obj):
    """The name in sys.modules of a module of a ModuleType subclass (torch's
    `torch.classes` and `torch.ops`), which cloudpickle, looking modules up
    by their exact type, cannot pickle; it takes them as submodules of a
    function that reads an attribute of that name (`self.classes`)."""
    if not isinstance(obj, types.ModuleType) or type(obj) is types.ModuleType:
        return None
    name = getattr(obj, "__name__", None)
    if isinstance(name, str) and sys.modules.get(name) is obj:
        return name
    return next((key for key, module in list(sys.modules.items()) if module is obj), None)


def encode(data):
    """`data` as an attr's string."""
    return _PREFIX + base64.b64encode(data).decode("ascii")


def is_encoded(text):
    return text.startswith(_PREFIX)


def decode(text):
    """The object an encode()d string holds."""
    return pickle.loads(base64.b64decode(text[len(_PREFIX):]))


def identity(obj):
    """A name for `obj` that is the same in every process that makes it."""
    try:
        return _digest(_canonical_bytes(obj))
    except Exception:  # noqa: BLE001 (a local class, something that holds a lock: its name then)
        target = obj if hasattr(obj, "__qualname__") else type(obj)
        return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(obj).__name__)}"


_PLAIN = frozenset((str, int, float, bytes, bool, type(None), tuple, list, dict))


class _CanonicalPickler(pickle.Pickler):
    """Pickles what a plain pickle would, but the same way in every process.
    persistent_id (called for every object, where reducer_override is not
    for sets) swaps in a canonical form; its bytes are hashed, never loaded."""

    def persistent_id(self, obj):
        kind = type(obj)
        if kind in _PLAIN:
            return None
        if kind in (set, frozenset):
            return (kind.__name__, sorted(_canonical_bytes(item) for item in obj))
        if isinstance(obj, types.CodeType):
            return ("code", _code_fields(obj))
        if isinstance(obj, types.FunctionType) and not _importable(obj):
            # Its code and defaults, not what it reads (a closure's cells,
            # globals): those hold run-specific things (argparse's args, a
            # rank, a run directory) that would make every restart and rank
            # another pipeline.
            return ("function", obj.__module__, obj.__qualname__,
                    _canonical_bytes((obj.__code__, obj.__defaults__, obj.__kwdefaults__)))
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.Tensor):
            flat = obj.detach().cpu().contiguous().reshape(-1)
            return ("tensor", kind.__qualname__, str(obj.dtype), tuple(obj.shape),
                    flat.view(torch.uint8).numpy().tobytes())
        return None


def _canonical_bytes(obj):
    out = io.BytesIO()
    _CanonicalPickler(out, protocol=4).dump(obj)
    return out.getvalue()


def _code_fields(code):
    """What a code object does, without where it is (file, line numbers)."""
    return (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags, code.co_code,
            _canonical_bytes(code.co_consts), code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
            code.co_name, getattr(code, "co_exceptiontable", b""))


def _importable(fn):
    """Whether a plain pickle names `fn` by reference: its module holds it
    under its qualified name."""
    target = sys.modules.get(fn.__module__)
    for part in fn.__qualname__.split("."):
        target = getattr(target, part, None)
    return target is fn


def _digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()[:32]


def _describe(obj):
    text = repr(obj)
    return text if len(text) <= 200 else text[:197] + "..."
