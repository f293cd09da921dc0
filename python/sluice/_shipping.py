"""Sending the user's callables and datasets to sluice's Python processes
by value, with cloudpickle (as Ray, Dask and joblib do): functions,
lambdas, closures, functools.partial, callable objects (torchvision and
albumentations transforms), bound methods and classes, wherever they were
defined (a module, the running script, `python -`, a notebook). The
processes never run the user's script: it has no main guard to need.

Each shipped object also gets a stable identity for the pipeline's
fingerprint (a saved state names the pipeline it came from): the digest of
its plain pickle where it has one (deterministic; by reference for what is
importable, with the state of objects), else its qualified name. cloudpickle's
own bytes are no identity: classes defined in `__main__` carry a random
tracker id.
"""

import base64
import hashlib
import marshal
import pickle

_PREFIX = "cloudpickle:"


def dumps(obj, who):
    """cloudpickle's bytes of `obj`; TypeError naming it and the reason
    when it cannot be sent (it holds a lock, a socket, a file open for writing...)."""
    import cloudpickle  # here, not at the top: a process that only loads needs no cloudpickle to import this

    try:
        return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 (whatever the pickler raises is the reason)
        raise TypeError(f"{who}: {_describe(obj)} cannot be sent to sluice's Python processes: "
                        f"{type(e).__name__}: {e}") from None


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
        return _digest(pickle.dumps(obj, protocol=4))
    except Exception:  # noqa: BLE001 (a lambda, a closure, a local class: its name and code then)
        target = obj if hasattr(obj, "__qualname__") else type(obj)
        name = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(obj).__name__)}"
        code = getattr(target, "__code__", None)
        return name if code is None else f"{name}@{_digest(marshal.dumps(code))}"


def _digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()[:32]


def _describe(obj):
    text = repr(obj)
    return text if len(text) <= 200 else text[:197] + "..."
