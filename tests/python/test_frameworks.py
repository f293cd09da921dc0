"""sluice.torch in the training frameworks that launch and drive the ranks
themselves: Hugging Face accelerate and PyTorch Lightning (real ones, on
gloo, 2 ranks)."""

import collections
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

_ENV = dict(os.environ, OMP_NUM_THREADS="1")


def _run(tmp_path, script, *args, torchrun):
    path = tmp_path / "job.py"
    path.write_text(script)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                "--max_restarts=0"] if torchrun else [sys.executable]
    return subprocess.run([*launcher, str(path), str(tmp_path), *args], env=_ENV, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


def _epochs(out):
    """{epoch: {rank: [ids]}} from the ranks' logs (rankR.log: lines of `EPOCH id id ...`)."""
    seen = collections.defaultdict(lambda: collections.defaultdict(list))
    for log in out.glob("rank*.log"):
        for line in log.read_text().splitlines():
            epoch, *ids = map(int, line.split())
            seen[epoch][int(log.stem[4:])].extend(ids)
    return seen


def _assert_each_epoch_once(seen, epochs, rows, global_batch):
    """Each epoch: the ranks' ids disjoint, as many on each rank, together
    every row but fewer than one global batch."""
    assert sorted(seen) == list(range(epochs)), sorted(seen)
    for epoch, ranks in seen.items():
        assert sorted(ranks) == [0, 1]
        assert len(ranks[0]) == len(ranks[1]) > 0
        both = ranks[0] + ranks[1]
        assert len(set(both)) == len(both), f"epoch {epoch}: a sample trained twice"
        assert set(both) <= set(range(rows)) and rows - len(both) < global_batch


_ACCELERATE = """
import datetime, sys
import numpy as np
import torch
import accelerate
import sluice, sluice.torch
from sluice import _distributed
_distributed._PATIENCE = datetime.timedelta(seconds=2)  # the test's: a minute by default
wrapped = sys.argv[2] == "wrapped"
acc = accelerate.Accelerator(cpu=True, kwargs_handlers=[
    accelerate.InitProcessGroupKwargs(backend="gloo", timeout=datetime.timedelta(seconds=20))])
loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(1000, dtype=np.int64)}).shuffle(256).batch(16))
model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
given = torch.utils.data.DataLoader(loader, batch_size=None) if wrapped else loader
model, optimizer, prepared = acc.prepare(model, optimizer, given)
for epoch in range(2):
    for batch in prepared:
        loss = model(batch["id"].float().unsqueeze(1)).pow(2).mean()
        acc.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        with open(f"{sys.argv[1]}/rank{acc.process_index}.log", "a") as log:
            print(epoch, *batch["id"].tolist(), file=log)
acc.end_training()
"""


def test_accelerate_given_the_loader_itself_trains_each_sample_once_an_epoch(tmp_path):
    pytest.importorskip("accelerate")
    job = _run(tmp_path, _ACCELERATE, "itself", torchrun=True)
    assert job.returncode == 0, job.stderr[-3000:]
    _assert_each_epoch_once(_epochs(tmp_path), 2, 1000, 32)


def test_accelerate_dispatching_a_wrapped_loader_from_rank_0_fails_naming_the_rank_not_hangs(tmp_path):
    # accelerate iterates a DataLoader around an IterableDataset on rank 0
    # only and broadcasts its batches: rank 0's loader waited in the ranks'
    # check for rank 1, which waited in the broadcast, for 30 minutes.
    pytest.importorskip("accelerate")
    # Now rank 0 says so, and the job ends at the group's timeout (which of
    # rank 0's check and rank 1's broadcast times out first is a race).
    job = _run(tmp_path, _ACCELERATE, "wrapped", torchrun=True)
    assert job.returncode != 0
    assert "rank 0 has waited 2 s for ranks [1] to start this loader's first pass" in job.stderr, job.stderr[-3000:]
    assert "accelerate's prepare() of a DataLoader around the TorchIterable" in job.stderr


_ONE_RANK_NEVER_COMES = """
import datetime, sys, time
import numpy as np
import torch.distributed as dist
import sluice, sluice.torch
from sluice import _distributed
_distributed._PATIENCE = datetime.timedelta(seconds=2)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(800, dtype=np.int64)}).batch(16))
if dist.get_rank() == 0:
    for batch in loader:
        pass
else:
    time.sleep(600)  # elsewhere, in no collective; torchrun stops it once rank 0 fails
"""


def test_a_rank_that_never_iterates_the_loader_is_named_at_the_groups_timeout(tmp_path):
    job = _run(tmp_path, _ONE_RANK_NEVER_COMES, torchrun=True)
    assert job.returncode != 0
    assert "rank 0 has waited 2 s for ranks [1] to start this loader's first pass" in job.stderr, job.stderr[-3000:]
    assert "rank 0: ranks [1] never started this loader's first pass (waited 0:00:10)" in job.stderr


_LIGHTNING = """
import sys
import numpy as np
import torch
import lightning
import sluice, sluice.torch

# Made at the module's top: Lightning runs this script again for rank 1
# with WORLD_SIZE and LOCAL_RANK set, and its rank known once its process group is.
loader = sluice.torch.TorchIterable(sluice.arrays({"id": np.arange(1000, dtype=np.int64)}).shuffle(256).batch(16))


class Model(lightning.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def train_dataloader(self):
        return loader

    def training_step(self, batch, index):
        with open(f"{sys.argv[1]}/rank{self.global_rank}.log", "a") as log:
            print(self.current_epoch, *batch["id"].tolist(), file=log)
        return self.layer(batch["id"].float().unsqueeze(1)).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


trainer = lightning.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2, logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            default_root_dir=sys.argv[1])
trainer.fit(Model())
"""


def test_lightning_ddp_with_the_loader_made_before_its_ranks_are_known_trains_each_sample_once(tmp_path):
    # Rank 1's loader refused WORLD_SIZE without RANK at its construction,
    # and Lightning stopped the job.
    pytest.importorskip("lightning")
    job = _run(tmp_path, _LIGHTNING, torchrun=False)
    assert job.returncode == 0, job.stderr[-3000:]
    assert "rank 1 of 2 (torch.distributed, initialized after this loader was made)" in job.stderr
    _assert_each_epoch_once(_epochs(tmp_path), 2, 1000, 32)
