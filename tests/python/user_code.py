"""User code the `python` op and Python dataset tests run in their processes (importable by name)."""

import os
import signal
import time

import numpy as np


def invert(sample):
    return {"image": 255 - sample["image"]}


def triples_x(sample):
    return {"y": sample["x"] * 3}


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


def image_of_none(sample):
    return {"image": None}


def forgets_image(sample):
    return {"picture": sample["image"]}


def adds_undeclared_mask(sample):
    return {"image": sample["image"], "mask": sample["image"][..., 0] > 127}


def inverts_in_the_whole_sample(sample):
    sample["image"] = 255 - sample["image"]
    return sample


def exits_on_37(sample):
    if int(sample["id"]) == 37:
        os._exit(3)
    return {"id": sample["id"]}


def killed_on_37(sample):
    if int(sample["id"]) == 37:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"id": sample["id"]}


class Squares:
    """A torch-style dataset: (image, label) tuples, image i filled with i."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        return torch.full((4, 4, 3), i % 256, dtype=torch.uint8), i


class LoggedSquares(Squares):
    """Squares that appends each index it makes to the file `log`, a line
    each, from whichever process makes it, taking `delay` seconds an item."""

    def __init__(self, n, log, delay=0.0):
        super().__init__(n)
        self.log = str(log)
        self.delay = delay

    def __getitem__(self, i):
        time.sleep(self.delay)
        with open(self.log, "a") as f:
            f.write(f"{i}\n")
        return super().__getitem__(i)


class SlowToLoad(Squares):
    """Squares whose copy in a fresh process takes `seconds` to load, as
    one importing torchvision or transformers does on a busy host."""

    def __init__(self, n, seconds):
        super().__init__(n)
        self.seconds = seconds

    def __setstate__(self, state):
        time.sleep(state["seconds"])
        self.__dict__.update(state)


class SortedByClass:
    """A dataset in ImageFolder's order: `classes` classes of `per_class`
    items, item i of class i // per_class."""

    def __init__(self, classes, per_class):
        self.classes, self.per_class = classes, per_class

    def __len__(self):
        return self.classes * self.per_class

    def __getitem__(self, i):
        return {"label": i // self.per_class}


class LazyFile:
    """A dataset that opens its file on first use, as h5py and lmdb ones do:
    item i is byte i of the file."""

    def __init__(self, path):
        self.path, self.file = str(path), None

    def __len__(self):
        return os.path.getsize(self.path)

    def __getitem__(self, i):
        if self.file is None:
            self.file = open(self.path, "rb")
        self.file.seek(i)
        return {"byte": self.file.read(1)[0]}


class TokenWindows:
    """nanoGPT's data: windows of a token file held as a numpy memmap."""

    def __init__(self, tokens, block):
        self.tokens, self.block = tokens, block

    def __len__(self):
        return len(self.tokens) // self.block

    def __getitem__(self, i):
        return {"x": np.asarray(self.tokens[i * self.block:(i + 1) * self.block], np.int32)}


def make_squares():
    return Squares(200)


class Blobs:
    """Dict items with two bytes columns of varying length (up to 40 KB: more
    than the engine first maps for them) and a Python float."""

    def __len__(self):
        return 120

    def __getitem__(self, i):
        return {"blob": blob(i), "score": i / 2, "tail": bytes([255 - i % 256]) * (i * 7 % 13)}


def blob(i):
    return bytes([i % 256]) * (i * 331 % 40000 + 1)


class Faulty:
    """Fails in one of five ways at index 37, as `how` says."""

    def __init__(self, how):
        self.how = how

    def __len__(self):
        return 100

    def __getitem__(self, i):
        if i == 37 and self.how == "raise":
            raise RuntimeError("index 37 is missing on disk")
        if i == 37 and self.how == "exit":
            os._exit(5)
        if self.how == "image":  # a photo of another size
            return {"x": np.zeros((6 if i == 37 else 4, 5, 3), np.uint8), "i": i}
        if self.how == "tokens":  # a longer text
            return {"x": np.zeros(5 if i == 37 else 3, np.int32), "i": i}
        if i == 37 and self.how in ("none", "str"):  # a code path that returns nothing, a caption
            return None if self.how == "none" else {"x": "caption", "i": i}
        shape = (3, 3) if i == 37 and self.how == "shape" else (2, 2)
        return {"x": np.zeros(shape, np.float32), "i": i}


def slow(sample):
    import time
    time.sleep(0.01)
    return {"id": sample["id"]}


def burns_2ms_of_cpu(sample):
    """Runs 2 ms of this process's CPU time (not the wall clock's) on each sample."""
    import time
    start = time.process_time()
    while time.process_time() - start < 0.002:
        pass
    return sample


def stalls_on_0(sample):
    """Each sample leaves a file naming its process in $STALL_DIR; sample 0
    waits until the other processes left $STALL_FOR files, and fails after
    30 s without them."""
    import time
    where, pid = os.environ["STALL_DIR"], os.getpid()
    if int(sample["id"]) == 0:
        deadline = time.monotonic() + 30
        while len([f for f in os.listdir(where) if not f.startswith(f"{pid}-")]) < int(os.environ["STALL_FOR"]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"sample 0 waited 30 s for {os.environ['STALL_FOR']} samples run elsewhere")
            time.sleep(0.01)
    with open(os.path.join(where, f"{pid}-{int(sample['id'])}"), "w"):
        pass
    return {"id": sample["id"]}


def numbers():
    """A generator function: 250 dict items in order."""
    for i in range(250):
        yield {"x": np.full(3, i, np.int64), "i": i}


class Stream:
    """An iterable (as a torch IterableDataset), iterated anew each epoch:
    (value, label) tuples."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return ((np.float32(i) / 2, i) for i in range(self.n))


def fails_at_37():
    for i in range(100):
        if i == 37:
            raise RuntimeError("the stream broke at 37")
        yield {"i": i}


class Photos:
    """Decoded uint8 images of many sizes (as a Dataset whose __getitem__
    decodes with PIL gives them), each filled with its index: RGB, and gray
    (H, W) ones at every third index."""

    def __len__(self):
        return 60

    def __getitem__(self, i):
        shape = (30 + i % 7 * 11, 40 + i % 5 * 13) + (() if i % 3 == 2 else (3,))
        return np.full(shape, i, np.uint8), i


def gradient(i):
    """An image whose pixels all differ: what an exact round trip shows."""
    return (np.arange(24 * 32 * 3, dtype=np.int64).reshape(24, 32, 3) * 7 + i).astype(np.uint8)


class Gradients:
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return {"image": gradient(i), "label": i}


def hangs_at_1000(sample):
    """Never returns from sample 1000 (a deadlock in the user's code), after
    writing its pid to the file $SLUICE_TEST_MARKER."""
    if int(sample["id"]) == 1000:
        with open(os.environ["SLUICE_TEST_MARKER"], "w") as f:
            f.write(str(os.getpid()))
        import time
        time.sleep(3600)
    return {"id": sample["id"]}


class Mapped:
    """Items fn(i): a dataset of an importable class holding the caller's
    function (one of the script being run, say)."""

    def __init__(self, n, fn):
        self.n, self.fn = n, fn

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.fn(i)


def blob_stream():
    """A generator of bytes of many lengths (up to 40 KB: more than the engine
    first maps for them), so a call makes fewer items than asked at its
    end and asks for more memory on the way."""
    for i in range(90):
        yield {"blob": blob(i), "i": i}


class HangsAt1000:
    """A dataset whose item 1000 never comes (a deadlock in __getitem__),
    after writing its pid to the file $SLUICE_TEST_MARKER."""

    def __len__(self):
        return 100000

    def __getitem__(self, i):
        if i == 1000:
            with open(os.environ["SLUICE_TEST_MARKER"], "w") as f:
                f.write(str(os.getpid()))
            import time
            time.sleep(3600)
        return {"id": np.int64(i)}


def thread_settings(sample):
    """The thread counts the process's libraries were told to use."""
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OPENCV_FOR_THREADS_NUM")
    return {"threads": np.array([int(os.environ.get(n, "0")) for n in names], dtype=np.int64)}
