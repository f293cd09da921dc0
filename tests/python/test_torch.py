"""sluice.torch: torch tensors without a copy, in a plain loop, in a
DataLoader, and in a few training steps."""

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
