"""W3 peer: NVIDIA DALI's CPU pipeline (device_id=None): readers.file,
decoders.image_random_crop, resize to 224, crop_mirror_normalize with a
random mirror, batch 256, on `--threads` CPU threads. With --rand-augment,
W5b: a random horizontal flip, then DALI's auto_aug.rand_augment(n=2, m=9)
as torchvision's (nearest, fill 0, shifts up to 150/331 of the side), then
crop_mirror_normalize without the mirror.

Runs in the DALI venv (bench/peers/ensure_dali_venv.sh).

    PY bench/peers/w3_dali.py --data DIR [--rand-augment] [--threads 2] [--batches 6] [--warmup 1]

The last line on stdout is one JSON object with "samples_per_s".
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import add_common_args, check_batches, make_logger, print_result, time_batches  # noqa: E402

log = make_logger("w3_dali")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "ImageFolder root (class folders of JPEGs)", 256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rand-augment", action="store_true", help="W5b: flip, then rand_augment(n=2, m=9)")
    args = p.parse_args(argv)
    check_batches(p, args)

    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.auto_aug import rand_augment

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=None,
                  enable_conditionals=args.rand_augment)
    def w3():
        jpegs, labels = fn.readers.file(file_root=args.data, random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4 / 3],
                                               num_attempts=10)
        images = fn.resize(images, device="cpu", resize_x=224, resize_y=224, antialias=True)
        mirror = fn.random.coin_flip(probability=0.5)
        if args.rand_augment:
            images = fn.flip(images, horizontal=mirror)
            images = rand_augment.rand_augment(images, n=2, m=9, shape=[224, 224], fill_value=0,
                                               interp_type=types.INTERP_NN, max_translate_rel=150 / 331)
            mirror = 0
        images = fn.crop_mirror_normalize(images, device="cpu", dtype=types.FLOAT, output_layout="CHW",
                                          mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255], mirror=mirror)
        return images, labels

    pipe = w3()
    pipe.build()
    log(f"DALI pipeline built on {args.threads} CPU threads")

    class Batches:
        def __next__(self):
            images, labels = pipe.run()
            return images, _Count(len(labels))

    class _Count:
        def __init__(self, n):
            self.shape = (n,)

    print_result(time_batches(Batches(), args.warmup, args.batches, "dali", "w5b" if args.rand_augment else "w3", log,
                              describe=lambda x: f"{len(x)} images"))


if __name__ == "__main__":
    main()
