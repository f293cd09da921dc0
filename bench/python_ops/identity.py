"""Functions the `python` op bench runs in its processes."""


def same(sample):
    return sample


def same_batch(batch):
    return batch
