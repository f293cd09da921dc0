"""W3 read from an object store by the streaming-dataset loaders: LitData
(`litdata.optimize` chunks read by its `StreamingDataset` and
`StreamingDataLoader`) and MosaicML Streaming (MDS shards read by its
`StreamingDataset` through a DataLoader), each as its docs show, with the
OpenCV expert's work per sample (bench/peers/w3_opencv.py: decode,
RandomResizedCrop's box, resize to 224, flip) and its normalized NCHW
float32 batches, made in the workers.

Runs in the venv of bench/peers/ensure_stream_venv.sh.

    PY bench/peers/w3_streaming.py write --library litdata|mosaic --data IMAGENET --out DIR
        [--per-shard 200]
    PY bench/peers/w3_streaming.py read --library litdata|mosaic --data s3://BUCKET/PREFIX
        --cache DIR [--batches 6] [--warmup 1] [--workers 2] [--batch-size 256]

`write` packs an ImageFolder tree into the library's format in DIR (the
JPEG's bytes and the class index, `--per-shard` images a chunk or shard, as
bench/peers/make_shards.py packs WebDataset shards); upload DIR's files
under the prefix. `read` streams them, credentials and endpoint from the
environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL),
caching what it downloads under --cache (give an empty folder: a fresh
job). The last line on stdout is one JSON object with "samples_per_s".
"""

import argparse
import os
import random
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_loader_args, epochs, make_logger,  # noqa: E402
                         print_result, time_batches)
from w3_opencv import SIZE, augment_into, list_images, to_nchw  # noqa: E402

log = make_logger("w3_streaming")
COLUMNS = {"jpg": "bytes", "cls": "int"}
RNG = random.Random()  # the augmentation's draws; each worker seeds its own


def import_streaming():
    """MosaicML Streaming's package. Its `streaming.vision` datasets, unused
    here, import torchvision, and PyPI's torchvision is built for the CUDA
    torch, not the CPU one this venv has: that subpackage is left out."""
    sys.modules.setdefault("streaming.vision", types.ModuleType("streaming.vision"))
    import streaming
    return streaming


def read_sample(path_label):
    """LitData's optimize calls this once an input: one sample."""
    path, label = path_label
    with open(path, "rb") as f:
        return {"jpg": f.read(), "cls": label}


def write(library, data, out, per_shard):
    items = list_images(data)
    if library == "litdata":
        import litdata
        litdata.optimize(fn=read_sample, inputs=items, output_dir=out, chunk_size=per_shard, num_workers=1,
                         mode="overwrite")
        return
    mean_bytes = sum(os.path.getsize(p) for p, _ in items) / len(items)
    with import_streaming().MDSWriter(out=out, columns=COLUMNS, size_limit=int(mean_bytes * per_shard)) as w:
        for item in items:
            w.write(read_sample(item))


def augmented(sample):
    import numpy as np
    image = np.empty((SIZE, SIZE, 3), np.uint8)
    augment_into(np.frombuffer(sample["jpg"], np.uint8), RNG, image)
    return image, sample["cls"]


def collate(samples):
    import numpy as np
    import torch
    images = np.stack([image for image, _ in samples])
    return to_nchw(images), torch.tensor([label for _, label in samples])


def worker_init(_worker_id):
    import cv2
    import torch
    from torch.utils.data import get_worker_info
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    info = get_worker_info()
    RNG.seed(info.seed if info else None)


def make_loader(library, remote, cache, batch_size, workers):
    if library == "litdata":
        import litdata
        from litdata.streaming import downloader

        # LitData builds its obstore client without allow_http, so a store
        # at an http:// endpoint (this bench's, on the loopback) is refused;
        # AWS and other https stores need no such option.
        downloader._OBSTORE_CLIENT_OPTIONS = dict(downloader._OBSTORE_CLIENT_OPTIONS, allow_http=True)

        class Augmented(litdata.StreamingDataset):
            def __getitem__(self, index):
                return augmented(super().__getitem__(index))

        dataset = Augmented(remote, cache_dir=cache, shuffle=True, drop_last=True)
        return litdata.StreamingDataLoader(dataset, batch_size=batch_size, num_workers=workers, collate_fn=collate,
                                           drop_last=True, persistent_workers=workers > 0,
                                           worker_init_fn=worker_init if workers > 0 else None)
    streaming = import_streaming()
    from torch.utils.data import DataLoader

    class Augmented(streaming.StreamingDataset):
        def __getitem__(self, index):
            return augmented(super().__getitem__(index))

    dataset = Augmented(remote=remote, local=cache, shuffle=True, batch_size=batch_size)
    return DataLoader(dataset, batch_size=batch_size, num_workers=workers, collate_fn=collate, drop_last=True,
                      persistent_workers=workers > 0, worker_init_fn=worker_init if workers > 0 else None)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="pack an ImageFolder tree into the library's format")
    w.add_argument("--library", choices=("litdata", "mosaic"), required=True)
    w.add_argument("--data", required=True, help="ImageFolder root (class folders of JPEGs)")
    w.add_argument("--out", required=True, help="folder for the chunks or shards (made)")
    w.add_argument("--per-shard", type=int, default=200, help="images a chunk or shard")
    r = sub.add_parser("read", help="time the loader on the uploaded dataset")
    r.add_argument("--library", choices=("litdata", "mosaic"), required=True)
    add_common_args(r, "the dataset's URL (s3://bucket/prefix)", 256, workers_help="DataLoader worker processes")
    r.add_argument("--cache", required=True, help="an empty folder for the library's local cache")
    args = p.parse_args(argv)
    if args.command == "write":
        if args.per_shard < 1:
            w.error("--per-shard must be >= 1")
        write(args.library, args.data, args.out, args.per_shard)
        log(f"{args.library}: {len(os.listdir(args.out))} files in {args.out}")
        return 0
    check_loader_args(r, args)
    loader = make_loader(args.library, args.data, args.cache, args.batch_size, args.workers)
    if args.workers == 0:
        worker_init(0)
    log(f"{args.library} from {args.data}, batch {args.batch_size}, {args.workers} workers; "
        f"warmup {args.warmup}, timed {args.batches}")
    result = time_batches(epochs(loader, f"w3_streaming {args.library}", args.batch_size), args.warmup, args.batches,
                          {"litdata": "LitData", "mosaic": "MosaicML Streaming"}[args.library], "w3", log)
    del loader
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
