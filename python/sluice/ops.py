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
        lines.append(f"    {a['name']} ({a['type']}{default}): {a['doc']}")
    op.__name__ = op.__qualname__ = schema["name"]
    op.__doc__ = "\n".join(lines)
    return op


__all__ = []
for _schema in _sluice.ops():
    globals()[_schema["name"]] = _make(_schema)
    __all__.append(_schema["name"])
del _schema
