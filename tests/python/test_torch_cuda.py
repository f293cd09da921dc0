"""sluice.torch with a map on device "cuda": CUDA tensors straight from
sluice's device memory, ordered after its kernels on torch's stream, equal to
the cpu pipeline's batches, memory going back to the pool. Skips, saying
why, without a GPU or a CUDA build."""

import pytest

torch = pytest.importorskip("torch")

import numpy as np

import sluice
import sluice.torch
from sluice import ops

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if "cuda" not in next(o for o in sluice._sluice.ops() if o["name"] == "rescale")["backends"]:
    pytest.skip("this sluice was built without the cuda backend", allow_module_level=True)


def images(rows=200):
    rng = np.random.default_rng(3)
    return sluice.arrays({"image": rng.integers(0, 256, (rows, 32, 32, 3), dtype=np.uint8),
                          "label": np.arange(rows, dtype=np.int64)})


def tail():
    return [ops.rescale(scale=1 / 255), ops.random_flip(mode="horizontal"),
            ops.random_rotation(degrees=36.0, fill_mode="reflect")]


def test_cuda_tensors_equal_the_cpu_pipeline_on_a_side_stream():
    cpu = [b["image"] for b in sluice.torch.TorchIterable(images().batch(64).map(*tail()))]
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # the consumer's stream waits on sluice's event
        gpu = [b for b in sluice.torch.TorchIterable(images().batch(64).map(*tail(), device="cuda"))]
        sums = [b["image"].sum() for b in gpu]
    side.synchronize()
    assert [b["image"].device.type for b in gpu] == ["cuda"] * 4
    assert gpu[0]["label"].device.type == "cpu", "columns no op reads stay on the host"
    for c, g in zip(cpu, gpu):
        torch.testing.assert_close(g["image"].cpu(), c, rtol=1e-5, atol=1e-5)
    assert all(torch.isfinite(s) for s in sums)


def test_device_memory_goes_back_to_the_pool():
    pipe = images(2048).batch(256).map(*tail(), device="cuda")
    for _ in range(2):  # warm the pool
        for b in sluice.torch.TorchIterable(pipe):
            b["image"].sum().item()
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    for _ in range(10):  # 80 batches of 3 MiB: 240 MiB if they leaked
        for b in sluice.torch.TorchIterable(pipe):
            b["image"].sum().item()
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info()
    assert free_before - free_after < (64 << 20), "released batches are reused, not leaked"


def test_device_chooses_the_gpu():
    pipe = images().batch(64).map(ops.rescale(scale=0.5), device="cuda")
    batch = next(iter(sluice.torch.TorchIterable(pipe, device="cuda:0")))
    assert batch["image"].device == torch.device("cuda:0")


def test_the_tail_after_a_distribute_runs_on_the_trainers_gpu():
    """Workers (the embedded cluster's) send uint8; the client's cuda map
    augments on its GPU: the same samples, the same draws, as in-process."""
    def by_label(batches):
        pairs = sorted((int(l), img.cpu()) for b in batches for l, img in zip(b["label"], b["image"]))
        return torch.stack([img for _, img in pairs])

    local = sluice.torch.TorchIterable(images(256).batch(64).map(*tail(), device="cuda"))
    remote = sluice.torch.TorchIterable(images(256).distribute().batch(64).map(*tail(), device="cuda"))
    got = list(remote)
    assert {b["image"].device.type for b in got} == {"cuda"}
    torch.testing.assert_close(by_label(got), by_label(local), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif("cuda" not in next(o for o in sluice._sluice.ops()
                                       if o["name"] == "decode_random_resized_crop")["backends"],
                    reason="this sluice was built without nvJPEG: the decode ops have no cuda kernel")
def test_jpegs_decoded_on_the_gpu_equal_the_cpu_decode_into_torch(tmp_path):
    import subprocess
    subprocess.run(["sluice", "make-data", "imagenet", "--out", str(tmp_path / "imgs"), "--count", "64",
                    "--classes", "2"], check=True, capture_output=True)
    cmn = ops.crop_mirror_normalize(mirror=0.5)

    def pipe(gpu):
        p = sluice.image_folder(tmp_path / "imgs", shuffle=False)
        if gpu:
            return p.batch(32).map(ops.decode_random_resized_crop(size=[96]), cmn, device="cuda")
        return p.map(ops.decode_random_resized_crop(size=[96], dct_scaling=False), cmn).batch(32)

    before = sluice.device_decode_stats()
    cpu = [b["image"] for b in sluice.torch.TorchIterable(pipe(False))]
    gpu = [b["image"] for b in sluice.torch.TorchIterable(pipe(True))]
    after = sluice.device_decode_stats()
    assert [g.device.type for g in gpu] == ["cuda", "cuda"] and gpu[0].shape == (32, 3, 96, 96)
    for c, g in zip(cpu, gpu):
        # The same windows and mirrors; pixels within the IDCTs' differences
        # (2 levels mean per image, divided by the normalization's std).
        per_image = (g.cpu() - c).abs().mean(dim=(1, 2, 3))
        assert per_image.max().item() < 2 / 255 / 0.224, per_image
    decoded = sum(after[k] - before[k] for k in ("hardware", "cuda", "cpu"))
    assert decoded == 64 and after["decoder"]


def test_the_page_locked_staging_counts_in_the_memory_budget():
    """The batches feeding a cuda map are written in page-locked staging
    buffers: pipe.memory() reports them, and the budget bounds them."""
    pipe = (images(4096).shuffle(512).batch(512).map(*tail(), device="cuda")
            .with_options(memory_budget_bytes=32 << 20))
    for b in sluice.torch.TorchIterable(pipe):
        b["image"].sum().item()
    m = pipe.memory()
    one_batch = 512 * 32 * 32 * 3  # uint8 rows before the tail
    assert m["staging"] >= one_batch, "the staging buffers are reported"
    assert m["held"] == (m["in_use"] + m["cached"] + m["rings"] + m["object_blocks"] + m["python_shared"]
                         + m["staging"] + m["mapped_files"] + m["columnar"] + m["arrays"])
    # Cached staging buffers beyond the most in use at once go back at the
    # epoch's end; at most one batch per stage over the budget was in use.
    assert m["staging"] <= (32 << 20) + 4 * one_batch
