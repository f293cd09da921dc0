"""PyTorch adapter: a pipeline's batches as dicts of torch tensors that share
sluice's buffers (DLPack, no copy).

The three-line swap in a training loop::

    loader = sluice.torch.TorchIterable(pipeline)        # instead of DataLoader(...)
    for batch in loader:
        images, labels = batch["image"], batch["label"]

It is an IterableDataset, so ``torch.utils.data.DataLoader(loader,
batch_size=None)`` works too (batching and parallelism stay in sluice: keep
num_workers=0).
"""

import warnings

import torch
import torch.utils.data
import torch.utils.dlpack


class TorchIterable(torch.utils.data.IterableDataset):
    """Iterates `pipeline` (a sluice.Pipeline) as dicts of torch tensors.

    Each pass is a new epoch unless `set_epoch` chose one. `samples` counts
    the samples delivered so far, over all passes.

    `pin_memory=True` hands out tensors in page-locked memory, so that
    ``.to("cuda", non_blocking=True)`` overlaps the copy with compute (one
    host copy per batch, as DataLoader's pin_memory). Without a CUDA device
    it warns once and yields ordinary tensors, as DataLoader does.
    """

    def __init__(self, pipeline, *, pin_memory=False):
        super().__init__()
        self._pipeline = pipeline
        self._epoch = 0
        self._pin = pin_memory and torch.cuda.is_available()
        if pin_memory and not self._pin:
            warnings.warn("sluice.torch: pin_memory=True but no CUDA device is available; "
                          "batches stay in pageable memory", stacklevel=2)
        self.samples = 0

    def __len__(self):
        """Batches per epoch, when known (see sluice.Pipeline.__len__)."""
        return len(self._pipeline)

    def set_epoch(self, epoch):
        """Makes the next pass epoch `epoch` (as DistributedSampler.set_epoch)."""
        self._epoch = epoch

    def __iter__(self):
        epoch = self._epoch
        self._epoch += 1
        it = self._pipeline.engine.iterate(epoch)
        while True:
            try:
                capsules = it.next_dlpack()
            except StopIteration:
                return
            batch = {name: torch.utils.dlpack.from_dlpack(c) for name, c in capsules.items()}
            if self._pin:
                batch = {name: t.pin_memory() for name, t in batch.items()}
            self.samples += next(iter(batch.values())).shape[0]
            yield batch
