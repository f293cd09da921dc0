"""sluice.torch: torch tensors without a copy, in a plain loop, in a
DataLoader, and in a few training steps."""

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import sluice
import sluice.torch
from sluice import ops


def mnist(d):
    return (sluice.mnist(str(d / "train-images-idx3-ubyte"), str(d / "train-labels-idx1-ubyte"))
            .map(ops.normalize(mean=0.1307, std=0.3081, scale=1 / 255))
            .batch(100))


def test_yields_torch_tensors_sharing_memory(mnist_dir):
    loader = sluice.torch.TorchIterable(mnist(mnist_dir))
    batch = next(iter(loader))
    image = batch["image"]
    assert isinstance(image, torch.Tensor) and image.dtype == torch.float32
    assert image.shape == (100, 28, 28)
    view = image.numpy()                       # numpy over the same memory
    view[0, 0, 0] = 42.0
    assert image[0, 0, 0].item() == 42.0
    assert view.__array_interface__["data"][0] == image.data_ptr()


def test_works_inside_a_dataloader_and_counts_samples(mnist_dir):
    loader = sluice.torch.TorchIterable(mnist(mnist_dir))
    dl = torch.utils.data.DataLoader(loader, batch_size=None)
    assert len(loader) == 6
    assert sum(b["label"].shape[0] for b in dl) == 600
    assert loader.samples == 600


def test_an_unbatched_pipeline_gives_samples_of_the_schemas_shape(mnist_dir):
    pipe = sluice.mnist(str(mnist_dir / "train-images-idx3-ubyte"), str(mnist_dir / "train-labels-idx1-ubyte"))
    assert pipe.schema == [("image", "uint8", [28, 28]), ("label", "int64", [])]
    loader = sluice.torch.TorchIterable(pipe)
    samples = list(loader)
    assert len(samples) == loader.samples == 600
    assert samples[0]["image"].shape == (28, 28) and samples[0]["label"].shape == ()
    labels = np.frombuffer((mnist_dir / "train-labels-idx1-ubyte").read_bytes()[8:], np.uint8)
    assert [int(s["label"]) for s in samples] == labels.tolist()


def test_a_few_training_steps_lower_the_loss(mnist_dir):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch = next(iter(sluice.torch.TorchIterable(mnist(mnist_dir))))
    losses = []
    for _ in range(30):  # fit one batch: the loss must fall
        loss = torch.nn.functional.cross_entropy(model(batch["image"]), batch["label"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_pin_memory_pins_or_warns_without_cuda(mnist_dir):
    if torch.cuda.is_available():
        batch = next(iter(sluice.torch.TorchIterable(mnist(mnist_dir), pin_memory=True)))
        assert batch["image"].is_pinned()
    else:
        with pytest.warns(UserWarning, match="no CUDA device"):
            loader = sluice.torch.TorchIterable(mnist(mnist_dir), pin_memory=True)
        assert next(iter(loader))["image"].shape == (100, 28, 28)


_DEBIAN_CHILD = """
import sys
import torch
import sluice, sluice.torch
from sluice import ops
raw = sys.argv[1]
pipe = sluice.mnist(raw + "/train-images-idx3-ubyte", raw + "/train-labels-idx1-ubyte").batch(32)
batch = next(iter(sluice.torch.TorchIterable(pipe)))
print(torch.__version__, torch.__file__, type(batch["image"]).__name__, tuple(batch["image"].shape))
"""


def test_imports_under_debians_python_with_apt_torch(mnist_dir, tmp_path):
    import os
    import subprocess
    system = "/usr/bin/python3"
    if subprocess.run([system, "-c", "import torch"], capture_output=True).returncode != 0:
        pytest.skip("/usr/bin/python3 has no torch (apt's python3-torch)")
    (tmp_path / "sluice").symlink_to(os.path.dirname(sluice.__file__))  # the package alone
    out = subprocess.run([system, "-c", _DEBIAN_CHILD, str(mnist_dir)], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert out.returncode == 0, out.stderr
    version, torch_file, kind, shape = out.stdout.split(" ", 3)
    assert torch_file.startswith("/usr/lib/python3/dist-packages/")
    assert kind == "Tensor" and shape.strip() == "(32, 28, 28)"


def test_a_training_loop_resumed_from_a_checkpoint_sees_the_rest_of_the_data(mnist_dir, tmp_path):
    # examples/resume_training.py (a shuffle buffer, random blur): interrupted
    # after 4 steps (of 6 an epoch),
    # checkpointed with torch.save, resumed in a new process, over 2 epochs:
    # the same steps, batches and losses as one uninterrupted run.
    import os
    import subprocess
    import sys
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "resume_training.py")

    def run(*extra):
        data = mnist_dir.parent.parent  # what sluice make-data wrote, as the example's usage line gives it
        out = subprocess.run([sys.executable, example, "--data", str(data), "--epochs", "2", *extra],
                             check=True, capture_output=True, text=True).stdout
        return [line.split(" loss ") for line in out.splitlines() if line.startswith("epoch")]

    whole = run()
    assert len(whole) == 12
    ckpt = str(tmp_path / "ckpt.pt")
    parts = run("--stop-at", "4", "--checkpoint", ckpt) + run("--resume", ckpt)
    assert [p[0] for p in parts] == [w[0] for w in whole]  # epoch, step and labels, step for step
    for p, w in zip(parts, whole):
        assert abs(float(p[1]) - float(w[1])) < 1e-4


def test_state_dict_before_a_pass_and_loading_twice_never_restart_the_epoch(mnist_dir):
    loader = sluice.torch.TorchIterable(mnist(mnist_dir))
    it = iter(loader)
    first = [next(it)["label"].clone() for _ in range(2)]
    state = loader.state_dict()
    rest = [b["label"].clone() for b in it]
    again = sluice.torch.TorchIterable(mnist(mnist_dir))
    iter(again)  # an iter() before loading changes nothing
    again.load_state_dict(state)
    again.load_state_dict(state)  # loading twice is loading once
    resumed = [b["label"] for b in again]
    assert len(first) + len(resumed) == 6
    assert all(torch.equal(a, b) for a, b in zip(resumed, rest))
    # Then the next epoch, whole.
    assert sum(1 for _ in again) == 6
    # A state edited by hand is refused on loading, naming the field.
    for field, value, error in (("next_epoch", -1, ValueError), ("next_epoch", 1.5, TypeError),
                                ("next_epoch", "2", TypeError), ("position", "abc", TypeError)):
        with pytest.raises(error, match=f"'{field}'"):
            again.load_state_dict({**state, field: value})


def test_a_state_after_leaving_a_pass_early_is_where_it_stopped(mnist_dir):
    import itertools
    whole = [b["label"].clone() for b in sluice.torch.TorchIterable(mnist(mnist_dir))]
    loader = sluice.torch.TorchIterable(mnist(mnist_dir))
    capped = [b["label"].clone() for b in itertools.islice(loader, 2)]
    state = loader.state_dict()
    # The live loader's next pass is a new epoch, as a DataLoader's.
    assert sum(1 for _ in loader) == 6
    restarted = sluice.torch.TorchIterable(mnist(mnist_dir))
    restarted.load_state_dict(state)
    rest = [b["label"] for b in restarted]
    assert len(rest) == 4
    assert all(torch.equal(a, b) for a, b in zip(capped + rest, whole))


_PREEMPTED = r"""
import os, signal, sys, threading, time
import numpy as np
import sluice, sluice.torch
from sluice import ops


def slow(batch):
    time.sleep(0.2)
    return {"x": batch["x"]}


pipe = (sluice.arrays({"x": np.zeros((600, 4), np.float32), "label": np.arange(600)})
        .batch(50).map(ops.python(slow, inputs="x", batched=True)))
loader = sluice.torch.TorchIterable(pipe)
seen, saved = [], {}


def on_term(signum, frame):  # a preempted trainer's handler: save where it stands, then exit
    saved["state"] = loader.state_dict()
    raise SystemExit(0)


signal.signal(signal.SIGTERM, on_term)
threading.Timer(1.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
try:
    for batch in loader:
        seen += batch["label"].tolist()
except SystemExit:
    pass
resumed = sluice.torch.TorchIterable(pipe)
resumed.load_state_dict(saved["state"])
rest = [x for batch in resumed for x in batch["label"].tolist()]
print(len(seen), len(rest), sorted(seen + rest) == list(range(600)))
"""


def test_a_sigterm_handler_saving_the_state_during_next_loses_no_batch(tmp_path):
    # The handler ran after next() had taken a batch the loop never had:
    # its state was past it, and the batch was never trained on.
    import subprocess
    import sys
    (tmp_path / "preempted.py").write_text(_PREEMPTED)
    run = subprocess.run([sys.executable, str(tmp_path / "preempted.py")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    seen, rest, whole = run.stdout.split()
    assert whole == "True" and int(seen) + int(rest) == 600, run.stdout


def test_a_loader_left_mid_pass_pickles_as_its_next_pass_would_run(mnist_dir):
    # Its pass's engine iterator went into the pickle: "cannot pickle
    # 'sluice._sluice.Iterator' object" (deepcopy, spawn).
    import copy
    import itertools
    import pickle
    loader = sluice.torch.TorchIterable(mnist(mnist_dir))
    next(itertools.islice(loader, 1))
    for made in (copy.deepcopy(loader), pickle.loads(pickle.dumps(loader))):
        assert sum(len(b["label"]) for b in made) == sum(len(b["label"]) for b in loader)


def test_an_older_pass_ending_late_leaves_the_newer_passs_position(mnist_dir):
    # A prefetch thread drained an abandoned pass after the next began: its
    # end cleared the position, and a resume skipped the rest of the epoch.
    loader = sluice.torch.TorchIterable(mnist(mnist_dir))
    old = iter(loader)
    next(old)
    new = iter(loader)
    seen = [next(new)["label"].clone() for _ in range(2)]
    state = loader.state_dict()
    assert sum(1 for _ in old) == 5
    assert loader.state_dict()["position"] == state["position"]
    restarted = sluice.torch.TorchIterable(mnist(mnist_dir))
    restarted.load_state_dict(loader.state_dict())
    assert sum(1 for _ in restarted) == 4  # the rest of the newer pass's epoch
    assert len(seen) == 2


def test_set_epoch_with_a_loaded_state_resumes_its_epoch_or_refuses_another(mnist_dir):
    loader = sluice.torch.TorchIterable(mnist(mnist_dir))
    for step, _ in enumerate(loader):  # epoch 0: 6 batches
        if step == 3:
            mid = loader.state_dict()
        last = loader.state_dict()  # at the epoch's last step, where loops save a checkpoint too
    again = sluice.torch.TorchIterable(mnist(mnist_dir))
    again.load_state_dict(mid)
    # The loop started at the epoch after would skip the 2 batches epoch 0
    # had left: refused at its pass, once the resumed pass shows them.
    again.set_epoch(1)
    with pytest.raises(ValueError, match=r"set_epoch\(1\) with a loaded state of epoch 0 pending"):
        next(iter(again))
    with pytest.raises(ValueError, match=r"set_epoch\(2\) with a loaded state of epoch 0 pending"):
        again.set_epoch(2)
    again.set_epoch(0)
    assert sum(1 for _ in again) == 2  # what epoch 0 had left
    again.set_epoch(1)
    assert sum(1 for _ in again) == 6
    # Saved at the last step: the loop may start at the state's epoch (an
    # empty pass) or at the one after it, as a trainer counting whole epochs does.
    epoch_1 = torch.cat([b["label"] for b in loader])
    for start in (0, 1):
        resumed = sluice.torch.TorchIterable(mnist(mnist_dir))
        resumed.load_state_dict(last)
        resumed.set_epoch(start)
        if start == 0:
            assert sum(1 for _ in resumed) == 0
            resumed.set_epoch(1)
        assert torch.equal(torch.cat([b["label"] for b in resumed]), epoch_1)


def _environment(monkeypatch, env):
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def test_a_rank_from_the_environment_that_cannot_be_is_named(mnist_dir, monkeypatch):
    _environment(monkeypatch, {"WORLD_SIZE": "2", "RANK": "2"})
    with pytest.raises(ValueError, match=re.escape("rank 2 of world size 2 (RANK/WORLD_SIZE): the rank must be in "
                                                   "[0, world_size)")):
        sluice.torch.TorchIterable(mnist(mnist_dir))


def test_a_world_size_without_a_rank_waits_for_the_rank_until_the_first_pass(mnist_dir, monkeypatch, capfd):
    # Lightning's ddp strategy starts its ranks with WORLD_SIZE and
    # LOCAL_RANK; another launcher may set RANK later.
    _environment(monkeypatch, {"WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    loader = sluice.torch.TorchIterable(mnist(mnist_dir))
    with pytest.raises(ValueError, match="WORLD_SIZE='2' is set but RANK is not, and torch.distributed is not "
                                         "initialized"):
        next(iter(loader))
    monkeypatch.setenv("RANK", "1")
    rows = sum(len(batch["label"]) for batch in loader)
    assert (loader.rank, loader.world_size) == (1, 2)
    assert rows == 300  # half of 600
    assert "rank 1 of 2 (RANK/WORLD_SIZE, set after this loader was made)" in capfd.readouterr().err


def test_a_loader_left_mid_epoch_at_exit_prints_nothing():
    import subprocess
    import sys
    # The generator closed at the interpreter's exit evaluated
    # `except _sluice.SluiceError` with the module's globals gone.
    script = ("import numpy as np, sluice, sluice.torch\n"
              "loader = sluice.torch.TorchIterable(sluice.arrays({'x': np.arange(1000, dtype=np.int64)}).batch(10))\n"
              "it = iter(loader)\n"
              "next(it)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Exception ignored" not in out.stderr, out.stderr


def test_device_is_a_cuda_device_and_says_when_it_does_nothing(mnist_dir):
    for device in ("cpu", "bogus", 3.5):
        with pytest.raises(ValueError, match="device must be a CUDA device"):
            sluice.torch.TorchIterable(mnist(mnist_dir), device=device)
    with pytest.warns(UserWarning, match="has none: its batches are CPU tensors"):
        loader = sluice.torch.TorchIterable(mnist(mnist_dir), device="cuda:1")
    assert next(iter(loader))["image"].device.type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="what a torch without CUDA says")
def test_maps_on_cuda_without_a_cuda_torch_say_which_op_and_what_to_do(mnist_dir):
    pipe = mnist(mnist_dir).map(ops.rescale(scale=0.5), device="cuda")
    # Sluice's own error where its build has no cuda backend (naming the
    # op), else that torch has none: never torch's assertion.
    with pytest.raises((sluice.SluiceError, RuntimeError), match="rescale|torch has no CUDA device") as e:
        sluice.torch.TorchIterable(pipe)
    assert "Torch not compiled" not in str(e.value)
