#!/usr/bin/python3
"""Packs an ImageFolder tree into WebDataset tar shards, as the webdataset
library's users write them: one sample per image, key "<class>/<file stem>",
the image as "<key>.<ext>" (its extension, lower case) and its class index
(sorted class folders, as ImageFolder numbers them) as "<key>.cls".

    python3 bench/peers/make_shards.py --data DIR --out DIR [--per-shard 200]

Images go into the shards in ImageFolder's order; skips the work when the
output folder already holds shards. Standard library only.
"""

import argparse
import io
import os
import sys
import tarfile

EXTENSIONS = (".jpg", ".jpeg", ".png")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="ImageFolder root (class folders of images)")
    p.add_argument("--out", required=True, help="folder for the shards")
    p.add_argument("--per-shard", type=int, default=200, help="samples per shard")
    args = p.parse_args(argv)
    if args.per_shard < 1:
        p.error("--per-shard must be >= 1")
    if os.path.isdir(args.out) and any(f.endswith(".tar") for f in os.listdir(args.out)):
        print(f"make_shards: {args.out} already holds shards", file=sys.stderr)
        return 0
    classes = sorted(d for d in os.listdir(args.data) if os.path.isdir(os.path.join(args.data, d)))
    samples = []
    for label, c in enumerate(classes):
        for root, _, files in sorted(os.walk(os.path.join(args.data, c))):
            for f in sorted(files):
                if os.path.splitext(f)[1].lower() in EXTENSIONS:
                    samples.append((os.path.join(root, f), c, label))
    if not samples:
        sys.exit(f"make_shards: no images in class folders under {args.data}")
    os.makedirs(args.out, exist_ok=True)
    for start in range(0, len(samples), args.per_shard):
        path = os.path.join(args.out, f"shard-{start // args.per_shard:05d}.tar")
        with tarfile.open(path + ".part", "w") as tar:
            for image, c, label in samples[start:start + args.per_shard]:
                stem, ext = os.path.splitext(os.path.basename(image))
                key = f"{c}/{stem}"
                tar.add(image, arcname=f"{key}{ext.lower()}")
                info = tarfile.TarInfo(f"{key}.cls")
                data = str(label).encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        os.replace(path + ".part", path)
    print(f"make_shards: {len(samples)} samples in {-(-len(samples) // args.per_shard)} shards in {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
