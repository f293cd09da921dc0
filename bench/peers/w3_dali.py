"""W3 peer: NVIDIA DALI's CPU pipeline (device_id=None): readers.file,
decoders.image_random_crop, resize to 224, crop_mirror_normalize with a
random mirror, batch 256, on `--threads` CPU threads.

Runs in the DALI venv (bench/peers/ensure_dali_venv.sh).

    PY bench/peers/w3_dali.py --data DIR [--threads 2] [--batches 6] [--warmup 1]

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
    args = p.parse_args(argv)
    check_batches(p, args)

    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=None)
    def w3():
        jpegs, labels = fn.readers.file(file_root=args.data, random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4 / 3],
                                               num_attempts=10)
        images = fn.resize(images, device="cpu", resize_x=224, resize_y=224, antialias=True)
        images = fn.crop_mirror_normalize(images, device="cpu", dtype=types.FLOAT, output_layout="CHW",
                                          mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                          mirror=fn.random.coin_flip(probability=0.5))
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

    print_result(time_batches(Batches(), args.warmup, args.batches, "dali", "w3", log,
                              describe=lambda x: f"{len(x)} images"))


if __name__ == "__main__":
    main()
