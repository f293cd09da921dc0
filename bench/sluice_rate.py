"""Timing of a sluice pipeline from Python, shared by the benches that run
sluice beside a Python peer."""

import time


def rate(pipe, epochs):
    """Samples per second over `epochs` epochs after one untimed epoch (which
    also reserves the working set), and what a sample of "image" is."""
    for _ in pipe:
        pass
    n, t0 = 0, time.perf_counter()
    for _ in range(epochs):
        for b in pipe:
            n += b["image"].shape[0]
    return n / (time.perf_counter() - t0), f"{b['image'].dtype}[{','.join(map(str, b['image'].shape[1:]))}]"
