"""Quickstart: build a pipeline in Python, iterate it, look at a batch.

    make demo                        # or: sluice make-data mnist --out data/mnist
    scripts/python_env.sh            # .venv with the sluice package
    .venv/bin/python examples/quickstart.py
"""

import argparse
import time

import sluice
from sluice import ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/mnist", help="make-data mnist output directory")
    args = parser.parse_args()
    raw = f"{args.data}/MNIST/raw"

    pipe = (sluice.mnist(f"{raw}/train-images-idx3-ubyte", f"{raw}/train-labels-idx1-ubyte")
            .shuffle(10000)
            .map(ops.normalize(mean=0.1307, std=0.3081, scale=1 / 255),
                 ops.gaussian_blur(ksize=11, sigma=[0.1, 2.0]))
            .batch(256, drop_remainder=True)
            .with_options(seed=42))
    print("columns:", pipe.schema)
    print("definition (what `sluice run` takes):")
    print(pipe.to_json())

    for epoch in range(2):
        start, samples = time.perf_counter(), 0
        for batch in pipe:                    # each pass is a new epoch
            samples += batch["image"].shape[0]
        seconds = time.perf_counter() - start
        print(f"epoch {epoch}: {samples} samples in {seconds:.2f} s "
              f"({samples / seconds:,.0f} samples/s); last batch image "
              f"{batch['image'].shape} {batch['image'].dtype}, labels {batch['label'][:8]}")


if __name__ == "__main__":
    main()
