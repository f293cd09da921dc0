"""The ops a pipeline can use, one function each, generated from sluice's op
registry: `help(sluice.ops.gaussian_blur)` shows the registered doc and attrs.

Each function returns the op's definition for `Pipeline.map` (or `filter`);
the attrs are checked when the pipeline is compiled.
"""

from sluice import _sluice


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
        if schema["name"] not in __all__:
            globals()[schema["name"]] = _make(schema)
            __all__.append(schema["name"])


_refresh()
