"""The ops a pipeline can use, one function each, generated from sluice's op
registry: `help(sluice.ops.gaussian_blur)` shows the registered doc and attrs.

Each function returns the op's definition for `Pipeline.map` (or `filter`);
the attrs are checked when the pipeline is compiled.
"""

import os

import numpy as np

from sluice import _interpreter, _sluice


def _make(schema):
    names = [a["name"] for a in schema["attrs"]]

    def op(**attrs):
        unknown = sorted(set(attrs) - set(names))
        if unknown:
            raise TypeError(f"{schema['name']}() got unknown attrs {unknown}; attrs: {names}")
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


def _import_path(fn):
    """'module:qualname' for a function importable by name; '/path/script.py:fn'
    for one defined in the script being run."""
    if isinstance(fn, str):
        return fn
    qualname = getattr(fn, "__qualname__", "")
    if not callable(fn) or "<lambda>" in qualname or "<locals>" in qualname:
        raise TypeError(f"ops.python needs a function importable by name (a module-level def, or "
                        f"'module:function'), not {fn!r}: its processes import it")
    if fn.__module__ == "__main__":
        import __main__
        if not getattr(__main__, "__file__", None):
            raise TypeError(f"ops.python: {qualname} is defined in an interactive session; its processes can "
                            "import it only from a module or a script file")
        return f"{os.path.abspath(__main__.__file__)}:{qualname}"
    return f"{fn.__module__}:{qualname}"


def _spec(name, value):
    if value is None:
        return name
    dtype, shape = value
    return f"{name}: {np.dtype(dtype).name}[{','.join(str(int(d)) for d in shape)}]"


def python(fn, outputs=None, *, batched=False, inputs=None, processes=0):
    """Your own Python function as an op, run in a pool of `processes`
    Python processes beside the native ops (0: as many as the op's map
    runs at once, which the autotuner sets, up to one per core).

    `fn` takes a dict of numpy arrays (one sample's, or with `batched=True`
    a whole batch's, batch dimension first; bytes columns come as uint8
    arrays) and returns a dict of arrays. It is given to the processes by
    import path: a module-level function (or "module.sub:fn"), not a lambda.
    If it has an `rng` parameter it gets a numpy.random.Generator seeded
    from (seed, op, epoch, sample), the same whichever process runs it.
    `inputs` lists the columns it gets (default: all); `outputs` declares
    what it returns, {"name": (dtype, shape)} or {"name": None} for "as the
    input of that name" (default: its inputs, as they are); outputs replace
    columns of the same name. An exception fails the pipeline naming the
    sample (file and record) with the traceback; a wrong dtype or shape
    names the column and both specs.
    """
    import inspect

    target = _import_path(fn)
    takes_rng = not isinstance(fn, str) and "rng" in inspect.signature(fn).parameters
    _interpreter.export()
    attrs = {"function": target, "rng": takes_rng, "processes": processes}
    if inputs is not None:
        attrs["inputs"] = ",".join([inputs] if isinstance(inputs, str) else inputs)
    if outputs is not None:
        attrs["outputs"] = "; ".join(_spec(name, value) for name, value in outputs.items())
    return {"op": "python_batch" if batched else "python", "attrs": attrs}
