#!/usr/bin/python3
"""W2 peer: CIFAR-10 TFRecords with dilation, blur and augmentation in torch.

Runs under Debian's /usr/bin/python3 (python3-torch, python3-torchvision,
python3-protobuf; `protoc` on PATH).

    /usr/bin/python3 bench/peers/w2_torch.py --data DIR [--batches 20]
        [--warmup 2] [--workers 2] [--batch-size 1024]

DIR holds the *.tfrecord files (tf.train.Example records with `image`: 3072
raw bytes HWC 32x32x3 uint8, and `label`: int64). Records are parsed with
Google protobuf, using the Example messages from <repo>/proto/example.proto
compiled at start-up by protoc into a temporary directory.

Progress goes to stderr; the last line on stdout is one JSON object:
    {"peer": "torch", "workload": "w2", "samples": S, "seconds": T,
     "samples_per_s": S/T}
"""

import argparse
import atexit
import glob
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_loader_args, epochs, make_logger,  # noqa: E402
                         print_result, time_batches)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_DIR = os.path.join(REPO, "proto")


log = make_logger("w2_torch")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "directory of *.tfrecord files", 1024,
                    workers_help="DataLoader worker processes")
    args = p.parse_args(argv)
    check_loader_args(p, args)
    return args


def load_example_pb2():
    """Compile proto/example.proto with protoc and import the result."""
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        sys.exit("w2_torch: the Python protobuf runtime (google.protobuf) is "
                 f"not installed for {sys.executable}; on Debian: "
                 "apt-get install python3-protobuf")
    proto = os.path.join(PROTO_DIR, "example.proto")
    if not os.path.isfile(proto):
        sys.exit(f"w2_torch: {proto} not found")
    protoc = shutil.which("protoc")
    if protoc is None:
        sys.exit("w2_torch: protoc not found on PATH; on Debian: "
                 "apt-get install protobuf-compiler")
    tmp = tempfile.mkdtemp(prefix="sluice-w2-pb2-")
    atexit.register(shutil.rmtree, tmp, True)
    r = subprocess.run([protoc, f"--python_out={tmp}", "-I", PROTO_DIR, proto],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"w2_torch: protoc failed on {proto}:\n{r.stderr}")
    sys.path.insert(0, tmp)
    try:
        import example_pb2
    except Exception as e:  # e.g. generated code newer than the runtime
        sys.exit(f"w2_torch: cannot import the code protoc generated: {e}")
    finally:
        sys.path.remove(tmp)
    return example_pb2


def tfrecord_files(data, name):
    """The sorted *.tfrecord files in `data`; exits naming `name` if none."""
    files = sorted(glob.glob(os.path.join(data, "*.tfrecord")))
    if not files:
        sys.exit(f"{name}: no *.tfrecord files in {data}")
    return files


def read_records(path):
    """Yield the payloads of the TFRecord file at `path`.

    Framing: u64 length (LE), u32 masked crc32c of the length, data,
    u32 masked crc32c of the data. The CRCs are NOT verified here (pure-Python
    crc32c would dominate the cost); a truncated file raises.
    """
    with open(path, "rb", buffering=1 << 20) as f:
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise IOError(f"{path}: truncated record header")
            (length,) = struct.unpack_from("<Q", header)
            data = f.read(length)
            footer = f.read(4)
            if len(data) < length or len(footer) < 4:
                raise IOError(f"{path}: truncated record")
            yield data


def cifar_examples(example_pb2, paths, keep=None):
    """Yield (image bytes, label) of the CIFAR Examples in the TFRecord
    files `paths`; with keep=(k, n), only every n-th record from the k-th."""
    ex = example_pb2.Example()
    n = 0
    for path in paths:
        for rec in read_records(path):
            n += 1
            if keep is not None and (n - 1) % keep[1] != keep[0]:
                continue
            ex.ParseFromString(rec)
            feat = ex.features.feature
            image = feat["image"].bytes_list.value[0]
            if len(image) != 3072:
                raise ValueError(f"{path}: image has {len(image)} bytes, expected 3072")
            yield image, int(feat["label"].int64_list.value[0])


def worker_share(files):
    """This DataLoader worker's (files, keep) for cifar_examples: whole
    files per worker, or, with fewer files than workers, every file and
    every nw-th record."""
    from torch.utils.data import get_worker_info
    info = get_worker_info()
    wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
    if len(files) >= nw:
        return files[wid::nw], None
    return files, (wid, nw)


def tfrecord_dataset(files, example_pb2, transform):
    """An IterableDataset of (transform(image bytes), label) over the files."""
    from torch.utils.data import IterableDataset

    class TFRecordExamples(IterableDataset):
        def __iter__(self):
            for image, label in cifar_examples(example_pb2, *worker_share(list(files))):
                yield transform(image), label

    return TFRecordExamples()


def make_transform():
    """W2's per-sample transform: image bytes to a CHW float32 tensor."""
    import torch
    import torch.nn.functional as F
    from torchvision import transforms as T
    from torchvision.transforms import InterpolationMode

    blur = T.GaussianBlur(11, sigma=0.8)
    augment = T.Compose([
        T.RandomHorizontalFlip(),
        T.RandomRotation(36, interpolation=InterpolationMode.BILINEAR),
        T.RandomAffine(degrees=0, scale=(0.9, 1.1),
                       interpolation=InterpolationMode.BILINEAR),
    ])

    def transform(image_bytes):
        x = torch.frombuffer(bytearray(image_bytes), dtype=torch.uint8)
        x = x.view(32, 32, 3).permute(2, 0, 1).float()  # CHW float
        # grey dilation 3x3 with a flat structuring element == max filter
        x = F.max_pool2d(x.unsqueeze(0), kernel_size=3, stride=1,
                         padding=1).squeeze(0)
        x = blur(x)
        x = x * (1.0 / 255.0)
        return augment(x)

    return transform


def build_dataset(files, example_pb2):
    return tfrecord_dataset(files, example_pb2, make_transform())


def worker_init(_worker_id):
    # DataLoader already does this in every worker; repeated to be explicit.
    import torch
    torch.set_num_threads(1)


def main(argv=None):
    args = parse_args(argv)
    files = tfrecord_files(args.data, "w2_torch")
    example_pb2 = load_example_pb2()

    from torch.utils.data import DataLoader

    dataset = build_dataset(files, example_pb2)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        num_workers=args.workers,
        drop_last=True,
        persistent_workers=args.workers > 0,
        worker_init_fn=worker_init if args.workers > 0 else None,
    )
    log(f"{len(files)} files, batch {args.batch_size}, {args.workers} "
        f"workers; warmup {args.warmup}, timed {args.batches}")

    it = epochs(loader, "w2_torch", args.batch_size)
    result = time_batches(it, args.warmup, args.batches, "torch", "w2", log)
    del it, loader
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
