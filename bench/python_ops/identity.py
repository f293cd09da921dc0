"""Functions the `python` op bench runs in its processes."""


def same(sample):
    return sample


def same_batch(batch):
    return batch


class Same:
    """The identity as a transform object (a class with __call__)."""

    def __call__(self, sample):
        return sample
