"""Finding a user's function by the name the `python` op and Python
datasets give their processes."""

import importlib
import runpy


def load(function):
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


def iterate(source):
    """A new iterator over from_generator's source: an iterable (a list, a
    torch IterableDataset) iterated, or a function (or class) called."""
    return iter(source() if isinstance(source, type) or not hasattr(source, "__iter__") else source)
