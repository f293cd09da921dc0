"""The ops a pipeline can use, one function each, generated from sluice's op
registry: `help(sluice.ops.gaussian_blur)` shows the registered doc and attrs.

Each function returns the op's definition for `Pipeline.map` (or `filter`);
the attrs are checked when the pipeline is compiled.
"""

import inspect
import math

import numpy as np

from sluice import _checks, _interpreter, _shipping, _sluice


def _not_finite(value):
    """Whether `value` (a number, or a list of them) holds a NaN or an infinity,
    which a pipeline's JSON cannot carry."""
    if isinstance(value, (list, tuple)):
        return any(_not_finite(v) for v in value)
    return isinstance(value, (float, np.floating)) and not math.isfinite(value)


def _plain(op, name, value):
    """`value` as the numbers, strings, booleans and lists a pipeline's JSON
    carries (numpy scalars and arrays as Python's); TypeError naming the op
    and attr for anything else."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(op, name, v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{op}(): attr '{name}' is a {type(value).__name__} ({value!r}): attrs are numbers, strings, "
                    "booleans or lists of them")


def _make(schema):
    names = [a["name"] for a in schema["attrs"]]

    def op(**attrs):
        unknown = sorted(set(attrs) - set(names))
        if unknown:
            raise TypeError(f"{schema['name']}() got unknown attrs {unknown}; attrs: {names}")
        attrs = {name: _plain(schema["name"], name, value) for name, value in attrs.items()}
        for name, value in attrs.items():
            if _not_finite(value):
                raise ValueError(f"{schema['name']}(): attr '{name}' is {value}: attrs are finite numbers")
        return {"op": schema["name"], "attrs": attrs}

    lines = [schema["doc"], "", "Attrs:"]
    for a in schema["attrs"]:
        default = f" = {a['default']}" if a["default"] else " (required)"
        allowed = f" ({a['allowed']})" if a["allowed"] else ""
        lines.append(f"    {a['name']} ({a['type']}{default}): {a['doc']}{allowed}")
    lines += ["", f"Runs on: {', '.join(schema['backends'])}."]
    if schema["registrant"] != "sluice's built-in ops":
        lines.append(f"From {schema['registrant']}.")
    op.__name__ = op.__qualname__ = schema["name"]
    op.__doc__ = "\n".join(lines)
    op._sluice_op = schema["name"]  # what Pipeline.map refuses uncalled
    return op


__all__ = []


def _refresh():
    """Adds a function for every registered op not yet here (a plugin's, once loaded)."""
    for schema in _sluice.ops():
        if schema["name"] in ("python", "python_batch"):  # ops.python below, which takes the function itself
            if "python" not in __all__:
                __all__.append("python")
        elif schema["name"] not in __all__:
            globals()[schema["name"]] = _make(schema)
            __all__.append(schema["name"])


_refresh()


def _readable_name(fn):
    """'module:qualname' of a callable, or of its type for an object."""
    target = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{getattr(target, '__module__', None) or '?'}:{getattr(target, '__qualname__', type(fn).__name__)}"


class _OnColumn:
    """A transform of one value (as torchvision's take an image) as a
    function of the sample: its result replaces that column."""

    def __init__(self, transform, column):
        self.transform = transform
        self.column = column

    def __call__(self, sample, **kwargs):  # kwargs: the op's rng, when the transform takes one
        return {self.column: self.transform(sample[self.column], **kwargs)}


def _on_column(fn, column, batched, inputs):
    """`fn` of one column's value as a function of the sample, and its inputs."""
    if isinstance(fn, str) or batched or inputs is not None:
        raise ValueError("ops.python: column= takes a callable run one sample at a time on that column "
                         "(no function by name, no batched=True, no inputs=)")
    _check_callable(fn)
    return _OnColumn(fn, column), [column]


def _check_callable(fn):
    if not callable(fn):
        raise TypeError(f"ops.python needs a callable (a function, or an object with __call__), not {fn!r}")


def _shipped(fn):
    """The attrs that send `fn` by value."""
    _check_callable(fn)
    shown = fn.transform if isinstance(fn, _OnColumn) else fn
    return {"function": _readable_name(shown), "pickled": _shipping.encode(_shipping.dumps(fn, "ops.python")),
            "identity": _shipping.identity(fn), "rng": _takes_rng(shown)}


def _takes_rng(fn):
    try:
        return "rng" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def _column_name(name, where):
    """`name`, checked to travel in the op's attrs (lists of names joined
    by ',', specs 'name: dtype[shape]' by ';')."""
    if not isinstance(name, str):
        raise TypeError(f"ops.python: {where} names columns by str, got {name!r}")
    odd = [c for c in ",:;" if c in name]
    if odd or name != name.strip() or not name:
        why = f"holds {' and '.join(repr(c) for c in odd)}" if odd else "is empty or starts or ends with a space"
        raise ValueError(f"ops.python: column {name!r} in {where} {why}, which ops.python's columns cannot; "
                         f"leave {where} out to take or return every column as it is, or name the column otherwise "
                         f"at its source")
    return name


def _spec(name, value):
    _column_name(name, "outputs")
    if value is None:
        return name
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"ops.python: outputs[{name!r}] must be (dtype, shape), e.g. (\"uint8\", [32, 32, 3]), "
                         f"or None (as the input of that name); got {value!r}")
    dtype, shape = value
    if isinstance(shape, int):
        raise ValueError(f"ops.python: outputs[{name!r}]'s shape is a list of dims, e.g. [{shape}]; got {shape!r}")
    if any(d is None for d in shape):
        raise ValueError(f"ops.python: outputs[{name!r}] has a dimension None: a python op's outputs have fixed "
                         "shapes (pad or cut variable-length values, e.g. token ids, to a length, and return the "
                         "length as a column of its own)")
    return f"{name}: {np.dtype(dtype).name}[{','.join(str(int(d)) for d in shape)}]"


def python(fn, outputs=None, *, batched=False, inputs=None, column=None, processes=0, deterministic=False):
    """Your own Python function as an op, run in a pool of `processes`
    Python processes beside the native ops (0: as many as the op's map
    runs at once, which the autotuner sets, up to one per core).

    `fn` takes a dict of numpy arrays (one sample's, or with `batched=True`
    a whole batch's, batch dimension first; bytes columns come as uint8
    arrays) and returns a dict of arrays: a function, a lambda, a closure, a
    functools.partial, a bound method or an object with ``__call__``,
    defined anywhere (a module, the script, a notebook). With `column`,
    `fn` takes that column's value instead and its result (an array, a
    torch tensor, a PIL image) replaces the column: a torchvision
    transform as it is, ``ops.python(T.Compose([...]), column="image")``
    (an albumentations pipeline takes the sample's names already:
    ``lambda s: aug(image=s["image"])``). It goes to the processes by
    value (cloudpickle) once each; one that cannot (it holds a lock or a
    socket) is a TypeError naming it, here. "module.sub:fn" names a
    function by import path instead. If it has an `rng` parameter it gets
    a numpy.random.Generator seeded from (seed, op, epoch, sample), the
    same whichever process runs it. sluice cannot see draws from a global
    generator (numpy's, torch's, random's, which torchvision's random
    transforms use), so it never writes the op's output once for all
    epochs (materialize, placement's kept prefix) unless `deterministic`
    says the function gives the same output for the same input.
    `inputs` lists the columns it gets (default: all); `outputs` declares
    what it returns, {"name": (dtype, shape)} or {"name": None} for "as the
    input of that name" (default: its inputs, as they are); outputs replace
    columns of the same name. An exception fails the pipeline naming the
    sample (file and record) with the traceback; a wrong dtype or shape
    names the column and both specs.
    """
    _interpreter.export()
    if column is not None:
        fn, inputs = _on_column(fn, column, batched, inputs)
    attrs = {"function": fn, "rng": False} if isinstance(fn, str) else _shipped(fn)
    attrs["processes"] = _checks.whole("processes", processes, 0, _checks.MOST_PROCESSES)
    if deterministic:
        attrs["deterministic"] = True
    if inputs is not None:
        attrs["inputs"] = ",".join(_column_name(name, "inputs")
                                   for name in ([inputs] if isinstance(inputs, str) else inputs))
    if outputs is not None:
        if not isinstance(outputs, dict):
            raise TypeError(f"ops.python: outputs must be a dict {{name: (dtype, shape)}} of the columns the function "
                            f"returns, got {outputs!r} (leave it out to return its inputs)")
        if not outputs:
            raise ValueError("ops.python: outputs={} declares no column; the function must return one at least "
                             "(leave outputs out to return its inputs)")
        attrs["outputs"] = "; ".join(_spec(name, value) for name, value in outputs.items())
    return {"op": "python_batch" if batched else "python", "attrs": attrs}
