"""Python as people write it: every kind of callable in ops.python and every
kind of dataset in from_dataset, defined in a module, a script without a
main guard, `python -` or a test's own scope, sent to the processes by
value; what cannot be sent is named at creation; errors show the user's
traceback once."""

import functools
import os
import re
import subprocess
import socket
import sys
import threading

import numpy as np
import pytest

import sluice
from sluice import ops

import user_code as fns

ROWS = 120
IMAGES = np.random.default_rng(1).integers(0, 256, (ROWS, 4, 4, 3), dtype=np.uint8)


def _source():
    return sluice.arrays({"id": np.arange(ROWS, dtype=np.int64), "image": IMAGES}, split_records=20)


def _images(pipe):
    return np.concatenate([b["image"] for b in pipe.batch(40)])


class Scale:
    """A transform object, as torchvision's and albumentations' are."""

    def __init__(self, by):
        self.by = by

    def __call__(self, sample):
        return {"image": (sample["image"] // self.by).astype(np.uint8)}

    def method(self, sample):
        return self(sample)


def _halve(sample, by=2):
    return {"image": (sample["image"] // by).astype(np.uint8)}


def _closure(by):
    def scaled(sample):
        return {"image": (sample["image"] // by).astype(np.uint8)}
    return scaled


def _local_class_instance():
    class Local:
        def __call__(self, sample):
            return {"image": (sample["image"] // 2).astype(np.uint8)}
    return Local()


@pytest.mark.parametrize("make", [
    lambda: (lambda s: {"image": (s["image"] // 2).astype(np.uint8)}),
    lambda: _closure(2),
    lambda: functools.partial(_halve, by=2),
    lambda: Scale(2),
    lambda: Scale(2).method,
    _local_class_instance,
    lambda: fns.invert,
], ids=["lambda", "closure", "partial", "object", "bound_method", "local_class", "module_function"])
@pytest.mark.parametrize("processes", [1, 2])
def test_every_kind_of_callable_runs_as_it_runs_here(make, processes):
    got = _images(_source().map(ops.python(make(), inputs="image", processes=processes)))
    want = np.stack([make()({"image": image})["image"] for image in IMAGES])
    np.testing.assert_array_equal(got, want)


class Noisy:
    """A callable object drawing from the op's `rng`."""

    def __call__(self, sample, rng):
        return {"image": (sample["image"] + rng.integers(0, 3, sample["image"].shape)).astype(np.uint8)}


def test_a_callable_object_draws_the_same_with_1_2_and_3_processes():
    runs = [_images(_source().map(ops.python(Noisy(), inputs="image", processes=p)).with_options(seed=4))
            for p in (1, 2, 3)]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    assert not np.array_equal(runs[0], IMAGES), "the draws changed nothing"


class HoldsALock:
    def __init__(self):
        self.lock = threading.Lock()

    def __call__(self, sample):
        return sample


class HoldsASocket:
    def __init__(self, s):
        self.socket = s

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return np.uint8(i)


def test_what_cannot_be_sent_is_named_with_the_reason_at_creation():
    with pytest.raises(TypeError, match=r"ops.python: <.*HoldsALock object.*> cannot be sent to sluice's Python "
                                        r"processes: TypeError: cannot pickle '_thread.lock' object"):
        ops.python(HoldsALock())
    with socket.socket() as s, pytest.raises(TypeError, match=r"from_dataset: <.*HoldsASocket object.*> cannot be "
                                                               r"sent.*cannot pickle 'socket' object"):
        sluice.from_dataset(HoldsASocket(s))


# As a user's script or notebook has them: its functions go by value, with
# the globals they use.
_DEEP_LOCKS = """
import threading
from sluice import ops
GUARD = threading.Lock()
def guarded(x):
    with GUARD:
        return x
class Settings:
    def __init__(self):
        self.options = {"size": 4, "sync": [1, threading.Lock()]}
    def __call__(self, x):
        return x
for fn in (lambda x: guarded(x), Settings()):
    try:
        ops.python(fn, column="image")
    except TypeError as e:
        print(e)
"""


def test_what_cannot_be_sent_deep_in_a_function_or_object_is_named_where_it_is():
    said = subprocess.run([sys.executable, "-c", _DEEP_LOCKS], capture_output=True, text=True, timeout=120)
    assert said.returncode == 0, said.stderr
    lines = said.stdout.splitlines()
    assert len(lines) == 2, said.stdout
    assert re.search(r"cannot pickle '_thread.lock' object \(it is .*<lambda>'s global 'guarded' → guarded's "
                     r"global 'GUARD': <unlocked _thread.lock", lines[0]), lines[0]
    assert re.search(r"cannot pickle '_thread.lock' object \(it is \.transform\.options\['sync'\]\[1\]: "
                     r"<unlocked _thread.lock", lines[1]), lines[1]


_FINGERPRINTED = """import sys; sys.path.insert(0, sys.argv[1]); import numpy as np, sluice, torch; from sluice import ops
class Scale:
    def __init__(self, by): self.by = by
    def __call__(self, s): return {'image': s['image'] // self.by}
class Normalize:  # as torchvision's: tensors of its own
    def __init__(self, mean): self.mean = torch.tensor(mean)
    def __call__(self, s): return s
class Keep:  # a set of strings: its order follows the process's string hashes
    def __init__(self, keys): self.keys = set(keys)
    def __call__(self, s): return s
class Labels:
    def __init__(self): self.labels = torch.arange(8)
    def __len__(self): return 8
    def __getitem__(self, i): return {'image': np.zeros(2, np.uint8) + int(self.labels[i])}
K = int(sys.argv[2])
%s
pipe = sluice.from_dataset(Labels()).map(ops.python(Scale(2)), ops.python(Normalize([0.5, 0.25])),
                                         ops.python(Keep(['image', 'label', 'mask', 'x'])),
                                         ops.python(lambda s: {'image': s['image'] * K}))
print(pipe.engine.fingerprint)
"""


def _fingerprint(lines_above="", seed="1", k=2):
    pytest.importorskip("torch")
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.run([sys.executable, "-c", _FINGERPRINTED % lines_above, here, str(k)], capture_output=True,
                          text=True, check=True, env=dict(os.environ, PYTHONHASHSEED=seed)).stdout


def test_a_fingerprint_is_the_same_in_every_process_that_builds_the_pipeline():
    prints = {_fingerprint(), _fingerprint(seed="2"), _fingerprint(seed="random"),
              _fingerprint(lines_above="# a comment above the lambda\n\n")}
    assert len(prints) == 1, prints


def test_a_lambdas_fingerprint_is_its_code_not_the_values_it_reads():
    # Those hold what differs by run and rank (argparse's args, a run
    # directory): a restart and every rank would be another pipeline.
    assert _fingerprint(k=2) == _fingerprint(k=3)


# A script as people write them: no main guard, a transform object and a
# dataset class of its own, a lambda.
_SCRIPT = """
import numpy as np
import sluice
from sluice import ops

class Squares:
    def __len__(self):
        return 50
    def __getitem__(self, i):
        return {"x": np.array([i * i], np.int64)}

class AddOne:
    def __call__(self, sample):
        return {"x": sample["x"] + 1}

pipe = sluice.from_dataset(Squares(), processes=2, shuffle=False).map(
    ops.python(AddOne(), processes=2), ops.python(lambda s: {"x": s["x"] * 2}, processes=2)).batch(50)
print("sum", int(next(iter(pipe))["x"].sum()))
"""


@pytest.mark.parametrize("how", ["script", "stdin", "dash_c"])
def test_a_script_without_a_main_guard_stdin_and_dash_c_run_once(how, tmp_path):
    if how == "script":
        path = tmp_path / "train.py"
        path.write_text(_SCRIPT)
        run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    elif how == "stdin":
        run = subprocess.run([sys.executable, "-"], input=_SCRIPT, capture_output=True, text=True, timeout=120)
    else:
        run = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    want = sum((i * i + 1) * 2 for i in range(50))
    assert run.stdout.split() == ["sum", str(want)], "the script ran more than once, or computed otherwise"


# torch registers `torch.classes` and `torch.ops`, modules of ModuleType
# subclasses, in sys.modules; a method reading `self.classes` beside a torch
# call made cloudpickle take `torch.classes` as a submodule it must send.
_TORCH_CLASSES_SCRIPT = """
import numpy as np
import torch
import sluice
from sluice import ops

class Folder(torch.utils.data.Dataset):
    def __init__(self):
        self.classes = ["cat", "dog", "eel"]
    def __len__(self):
        return 9
    def __getitem__(self, i):
        return {"label": torch.tensor(i % len(self.classes)).numpy()}

class Relabel:
    def __init__(self):
        self.ops = 2
    def __call__(self, sample):
        return {"label": torch.as_tensor(sample["label"]).numpy() * self.ops}

pipe = sluice.from_dataset(Folder(), processes=1, shuffle=False).map(ops.python(Relabel(), processes=1)).batch(9)
print(next(iter(pipe))["label"].tolist())
"""


def test_a_dataset_and_a_transform_whose_attributes_share_torchs_module_names_are_sent():
    pytest.importorskip("torch")
    run = subprocess.run([sys.executable, "-c", _TORCH_CLASSES_SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == str([i % 3 * 2 for i in range(9)])


def test_an_exception_shows_the_users_traceback_once_naming_the_sample():
    def fails_on_7(sample):
        if int(sample["id"]) == 7:
            raise ValueError("seven is not allowed")
        return sample

    pipe = _source().map(ops.python(fails_on_7, inputs="id"))
    with pytest.raises(sluice.SluiceError) as caught:
        list(pipe.batch(40))
    message = str(caught.value)
    assert "record 7" in message
    assert message.count("Traceback (most recent call last)") == 1, message
    assert message.count("ValueError: seven is not allowed") == 1, message
    assert "fails_on_7" in message


def test_through_the_service_a_worker_runs_a_callable_object_the_client_sent():
    pipe = _source().map(ops.python(Scale(3), inputs="image")).distribute(local_workers=1).batch(40)
    np.testing.assert_array_equal(np.concatenate([b["image"] for b in pipe]), IMAGES // 3)


@pytest.mark.parametrize("refuser", ["worker", "dispatcher"])
def test_a_service_started_with_no_python_refuses_code_a_consumer_sends(refuser):
    from conftest import start_server
    no_python = {"worker": [], "dispatcher": []}
    no_python[refuser] = ["--no-python"]
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0", *no_python["dispatcher"]])
    worker, _ = start_server(["worker", "--dispatcher", f"127.0.0.1:{port}", "--host", "127.0.0.1",
                              *no_python["worker"]])
    try:
        pipe = _source().map(ops.python(Scale(3), inputs="image")).distribute(f"127.0.0.1:{port}").batch(40)
        # A dispatcher refuses it; with only --no-python workers, no worker runs it.
        refused = {"dispatcher": r"this dispatcher takes no Python code \(--no-python\)",
                   "worker": r"the pipeline runs Python code and no live worker does \(1 workers, started with "
                             r"--no-python\)"}[refuser]
        with pytest.raises(sluice.SluiceError, match=refused):
            next(iter(pipe))
    finally:
        for process in (worker, dispatcher):
            process.terminate()
            process.wait(timeout=30)


def test_a_worker_without_the_callables_module_fails_the_registration_naming_it(tmp_path, monkeypatch):
    from conftest import start_server
    env = dict(os.environ, SLUICE_PYTHON=sys.executable,
               SLUICE_PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # without tmp_path
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0"])
    worker, _ = start_server(["worker", "--dispatcher", f"127.0.0.1:{port}", "--host", "127.0.0.1"], env=env)
    (tmp_path / "only_on_the_client.py").write_text("def halve(s):\n    return {'image': s['image'] // 2}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import only_on_the_client
    try:
        pipe = _source().map(ops.python(only_on_the_client.halve, inputs="image"))
        pipe = pipe.distribute(f"127.0.0.1:{port}").batch(40)
        with pytest.raises(sluice.SluiceError, match=r"No module named 'only_on_the_client'") as caught:
            next(iter(pipe))
        assert "split" not in str(caught.value), "it failed mid-epoch, not at the registration"
    finally:
        for process in (worker, dispatcher):
            process.terminate()
            process.wait(timeout=30)


def test_a_transform_of_one_column_replaces_it():
    got = _images(_source().map(ops.python(lambda image: image // 3, column="image", processes=2)))
    np.testing.assert_array_equal(got, IMAGES // 3)
    def jitter(image, rng):
        return (image ^ rng.integers(0, 4, image.shape)).astype(np.uint8)

    draws = [_images(_source().map(ops.python(jitter, column="image", processes=p)).with_options(seed=4))
             for p in (1, 2)]
    np.testing.assert_array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[0], IMAGES), "the transform got no rng"
    with pytest.raises(ValueError, match="column= takes a callable run one sample at a time"):
        ops.python(lambda image: image, column="image", batched=True)


def test_an_albumentations_pipeline_runs_as_it_runs_here():
    A = pytest.importorskip("albumentations")
    aug = A.Compose([A.HorizontalFlip(p=1.0), A.Normalize(mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.4))])
    pipe = _source().map(ops.python(lambda s: aug(image=s["image"]), inputs="image",
                                    outputs={"image": ("float32", [4, 4, 3])}, processes=2))
    want = np.stack([aug(image=image)["image"] for image in IMAGES])
    np.testing.assert_allclose(_images(pipe), want, rtol=0, atol=1e-6)


# Debian's interpreter has torchvision (0.14: the v1 transforms); sluice and
# cloudpickle come from this environment's site-packages.
_TORCHVISION = """
import numpy as np, sluice
import torchvision.transforms as T
from sluice import ops
transform = T.Compose([T.ToTensor(), T.RandomHorizontalFlip(p=1.0), T.Normalize([0.5, 0.4, 0.3], [0.2, 0.3, 0.4])])
images = np.random.default_rng(1).integers(0, 256, (24, 6, 6, 3), dtype=np.uint8)
pipe = sluice.arrays({"image": images}, split_records=8).map(
    ops.python(transform, column="image", outputs={"image": ("float32", [3, 6, 6])}, processes=2))
got = np.concatenate([b["image"] for b in pipe.batch(8)])
want = np.stack([transform(image).numpy() for image in images])
print("max difference", float(np.abs(got - want).max()))
"""


def test_a_torchvision_compose_runs_on_a_column_as_it_runs_here(tmp_path):
    system = "/usr/bin/python3"
    if subprocess.run([system, "-c", "import torchvision"], capture_output=True).returncode != 0:
        pytest.skip(f"{system} has no torchvision (Debian's python3-torchvision)")
    import cloudpickle
    for module in (sluice, cloudpickle):  # this environment's packages, and nothing else of it
        os.symlink(os.path.dirname(module.__file__), tmp_path / module.__name__)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    env.pop("SLUICE_PYTHON", None)
    env.pop("SLUICE_PYTHONPATH", None)
    run = subprocess.run([system, "-c", _TORCHVISION], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["max", "difference", "0.0"], run.stdout


def test_a_generator_defined_here_with_what_it_captured_is_sent_by_value():
    start = 100

    def counting():
        for i in range(30):
            yield {"x": np.int64(start + i)}

    got = np.concatenate([b["x"] for b in sluice.from_generator(counting).batch(10)])
    np.testing.assert_array_equal(got, np.arange(100, 130))
