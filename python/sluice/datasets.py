"""Python datasets as sources: a map-style dataset's items made by index in
a pool of Python processes (sluice.from_dataset)."""

import hashlib
import os
import pickle
import sys
import tempfile

import numpy as np

from sluice import _interpreter
from sluice._imports import load as _load
from sluice.pipeline import Pipeline

_DTYPES = ("uint8", "int32", "int64", "float32", "float16")


class _PickleFile:
    """The dataset pickled for the processes to load; removed with the last
    pipeline made of it."""

    def __init__(self, dataset):
        data = pickle.dumps(dataset, protocol=pickle.HIGHEST_PROTOCOL)
        self.digest = hashlib.sha256(data).hexdigest()
        with tempfile.NamedTemporaryFile(prefix="sluice-dataset-", suffix=".pickle", delete=False) as f:
            self.path = f.name
            f.write(data)

    def __del__(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _column(name, value):
    """The column a value of dataset[0] declares."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"name": name, "dtype": "bytes", "shape": []}
    a = np.asarray(value)
    dtype = {"float64": "float32", "bool": "uint8"}.get(a.dtype.name, a.dtype.name)
    if dtype not in _DTYPES:
        raise TypeError(f"from_dataset: dataset[0]['{name}'] is {a.dtype}; sluice holds {', '.join(_DTYPES)} "
                        "(float64 and bool become float32 and uint8) or bytes")
    return {"name": name, "dtype": dtype, "shape": list(a.shape)}


def from_dataset(dataset, *, names=None, processes=0, split_records=64, shuffle=True):
    """A pipeline reading a map-style dataset: anything with ``__len__`` and
    ``__getitem__`` (a torch ``Dataset`` as it is), its items made by index
    in a pool of `processes` Python processes (0: one per core).

    Items are dicts, or tuples (named `names`, default "0", "1", ...) or
    single values (named `names[0]`, default "0"), of numpy arrays, torch
    tensors, scalars or bytes; dataset[0] fixes each column's dtype and
    shape (float64 and bool become float32 and uint8; bytes may vary in
    length: decode them with the image ops). Splits are ranges of
    `split_records` indices, shuffled each epoch when `shuffle` (sluice's
    seed), so a shuffle op, `distribute` and checkpoints work as on files.

    The processes get the dataset pickled (as torch's DataLoader does with
    spawn): its class must be importable. Or give "module:function", a
    function returning the dataset, which each process calls: what a
    `distribute`d pipeline's remote workers need. An exception in
    __getitem__ fails the pipeline naming the index, with the traceback.
    """
    _interpreter.export()
    hold = None
    if isinstance(dataset, str):
        spec, dataset = dataset, _load(dataset)()
    else:
        hold = _PickleFile(dataset)
        spec = f"pickle:{hold.path}"
    length = len(dataset)
    if length == 0:
        raise ValueError("from_dataset: the dataset is empty")
    item = dataset[0]
    if isinstance(item, dict):
        columns = [_column(str(k), v) for k, v in item.items()]
    else:
        values = list(item) if isinstance(item, (tuple, list)) else [item]
        labels = list(names) if names is not None else [str(i) for i in range(len(values))]
        if len(labels) != len(values):
            raise ValueError(f"from_dataset: {len(labels)} names for items of {len(values)} values")
        columns = [_column(n, v) for n, v in zip(labels, values)]
    main = sys.modules["__main__"]
    main_script = (os.path.abspath(main.__file__) if hold is not None and getattr(main, "__file__", None)
                   and type(dataset).__module__ == "__main__" else "")
    source = {"python_dataset": {"dataset": spec, "name": type(dataset).__name__, "length": length,
                                 "columns": columns, "processes": processes, "main_script": main_script,
                                 "digest": hold.digest if hold is not None else ""},
              "split_records": split_records, "shuffle_splits": shuffle}
    return Pipeline({"nodes": [{"source": source}]}, _hold=hold)

