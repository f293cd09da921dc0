"""Functions the `python` op tests run in its processes (importable by name)."""

import os
import signal

import numpy as np


def invert(sample):
    return {"image": 255 - sample["image"]}


def noise(sample, rng):
    return {"noise": rng.random(4).astype(np.float32)}


def batch_mean(batch):
    images = batch["image"]
    return {"mean": images.reshape(len(images), -1).mean(axis=1).astype(np.float32)}


def decode(sample):
    return {"image": np.frombuffer(sample["image"].tobytes(), np.uint8).reshape(32, 32, 3)}


def fails_on_37(sample):
    if int(sample["id"]) == 37:
        raise ValueError("id 37 is cursed")
    return {"id": sample["id"]}


def wrong_dtype(sample):
    return {"image": sample["image"].astype(np.float32)}


def forgets_image(sample):
    return {"picture": sample["image"]}


def exits_on_37(sample):
    if int(sample["id"]) == 37:
        os._exit(3)
    return {"id": sample["id"]}


def killed_on_37(sample):
    if int(sample["id"]) == 37:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"id": sample["id"]}
