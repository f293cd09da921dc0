"""W2 peer: the tf.data pipeline (TFRecords, dilation, blur, Keras augmentation).

Runs in the peer venv (tensorflow-cpu, Keras 3), see ensure_peer_venv.sh:

    PY=$(bench/peers/ensure_peer_venv.sh)
    "$PY" bench/peers/w2_tfdata.py --data DIR [--batches 20] [--warmup 2]
        [--batch-size 1024] [--threads 2]

DIR holds the *.tfrecord files (tf.train.Example records with `image`: 3072
raw bytes HWC 32x32x3 uint8, and `label`: int64).

Progress goes to stderr; the last line on stdout is one JSON object:
    {"peer": "tfdata", "workload": "w2", "samples": S, "seconds": T,
     "samples_per_s": S/T}
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_batches, make_logger,  # noqa: E402
                         print_result, time_batches)


log = make_logger("w2_tfdata")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "directory of *.tfrecord files", 1024)
    p.add_argument("--threads", type=int, default=2,
                   help="TF inter-/intra-op threads (the machine's cores)")
    p.add_argument("--workers", type=int, default=None,
                   help="accepted for a uniform command line; tf.data sizes "
                        "its own parallelism (AUTOTUNE)")
    args = p.parse_args(argv)
    check_batches(p, args)
    if args.warmup < 0 or args.batch_size < 1 or args.threads < 1:
        p.error("--warmup must be >= 0, --batch-size and --threads >= 1")
    return args


def gaussian_kernel_1d(tf, sigma, size):
    """tfa.image's _get_gaussian_kernel: softmax(-x^2 / (2 sigma^2))."""
    x = tf.range(-size // 2 + 1, size // 2 + 1)
    x = tf.cast(x ** 2, tf.float32)
    return tf.nn.softmax(-x / (2.0 * sigma ** 2))


def make_gaussian_filter2d(tf, filter_shape=(11, 11), sigma=0.8):
    """Return f(image) behaving like tfa.image.gaussian_filter2d(image,
    filter_shape, sigma) with its defaults (padding="REFLECT").

    tensorflow_addons is end-of-life and does not import with TF 2.21, so
    this re-implements it: non-float input is computed in float32, the image
    is REFLECT-padded by (k-1)//2 / k-1-(k-1)//2 on each side, convolved
    depthwise with the outer product of the two 1-D kernels (VALID), and the
    result is cast back to the input dtype (a truncating cast for uint8, as
    tfa does). Works on HWC or NHWC images.
    """
    fh, fw = filter_shape
    ky = gaussian_kernel_1d(tf, float(sigma), fh)[:, tf.newaxis]
    kx = gaussian_kernel_1d(tf, float(sigma), fw)[tf.newaxis, :]
    k2d = tf.matmul(ky, kx)[:, :, tf.newaxis, tf.newaxis]  # [fh, fw, 1, 1]
    pt, pl = (fh - 1) // 2, (fw - 1) // 2
    paddings = [[0, 0], [pt, fh - 1 - pt], [pl, fw - 1 - pl], [0, 0]]

    def gaussian_filter2d(image):
        orig_dtype = image.dtype
        rank3 = image.shape.rank == 3
        if rank3:
            image = image[tf.newaxis]
        if not orig_dtype.is_floating:
            image = tf.cast(image, tf.float32)
        kernel = tf.cast(tf.tile(k2d, [1, 1, tf.shape(image)[3], 1]),
                         image.dtype)
        image = tf.pad(image, paddings, mode="REFLECT")
        out = tf.nn.depthwise_conv2d(image, kernel, strides=(1, 1, 1, 1),
                                     padding="VALID")
        if rank3:
            out = out[0]
        return tf.cast(out, orig_dtype)

    return gaussian_filter2d


def build_pipeline(tf, keras, data_dir, batch_size, service=None):
    """The articles' pipeline; with `service` (a tf.data service dispatcher
    address) the part up to the blur runs on that service's workers."""
    AUTOTUNE = tf.data.AUTOTUNE

    feature_spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record):
        ex = tf.io.parse_single_example(record, feature_spec)
        image = tf.io.decode_raw(ex["image"], tf.uint8)
        image = tf.reshape(image, [32, 32, 3])
        return image, ex["label"]

    dilation_filter = tf.zeros([3, 3, 3], dtype=tf.uint8)

    def dilate(image, label):
        # grey dilation 3x3: flat (zero) structuring element, SAME, NHWC
        out = tf.nn.dilation2d(image[tf.newaxis], dilation_filter,
                               strides=[1, 1, 1, 1], padding="SAME",
                               data_format="NHWC", dilations=[1, 1, 1, 1])
        return out[0], label

    blur2d = make_gaussian_filter2d(tf, (11, 11), 0.8)

    def blur(image, label):
        return blur2d(image), label

    # Layers are built once, outside the map functions.
    rescaling = keras.layers.Rescaling(1.0 / 255)
    augmentation = keras.Sequential([
        keras.layers.RandomFlip("horizontal"),
        keras.layers.RandomRotation(0.1),  # fraction of 2*pi: +-36 degrees
        keras.layers.RandomZoom(0.1),
    ])

    def rescale(images, labels):
        return rescaling(images), labels

    def to_nchw(images, labels):
        # What a PyTorch model takes, as sluice and the torch peer hand it.
        return tf.transpose(images, [0, 3, 1, 2]), labels

    def augment(images, labels):
        # Keras 3's random preprocessing layers default to training=True
        # when called directly; passed explicitly so augmentation is on.
        # Note: under a parallel map (AUTOTUNE) concurrent calls can read the
        # layers' shared SeedGenerator state before it is advanced, so two
        # batches may now and then get identical random transforms; kept as
        # in the reference pipeline (it does not change the cost).
        return augmentation(images, training=True), labels

    files = tf.data.Dataset.list_files(os.path.join(data_dir, "*.tfrecord"))
    ds = tf.data.TFRecordDataset(files, num_parallel_reads=AUTOTUNE).repeat()
    ds = ds.map(parse, num_parallel_calls=AUTOTUNE)
    ds = ds.map(dilate, num_parallel_calls=AUTOTUNE)
    ds = ds.map(blur, num_parallel_calls=AUTOTUNE)
    if service is not None:
        ds = ds.apply(tf.data.experimental.service.distribute(
            processing_mode="parallel_epochs", service=service))
    ds = ds.batch(batch_size)
    ds = ds.map(rescale, num_parallel_calls=AUTOTUNE)
    ds = ds.map(augment, num_parallel_calls=AUTOTUNE)
    ds = ds.map(to_nchw, num_parallel_calls=AUTOTUNE)
    ds = ds.prefetch(AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = False
    return ds.with_options(options)


def main(argv=None):
    args = parse_args(argv)
    import glob
    if not glob.glob(os.path.join(args.data, "*.tfrecord")):
        sys.exit(f"w2_tfdata: no *.tfrecord files in {args.data}")
    try:
        import tensorflow as tf
        import keras
    except ImportError as e:
        sys.exit(f"w2_tfdata: tensorflow is not importable by {sys.executable} "
                 f"({e}); run it with the python that "
                 "bench/peers/ensure_peer_venv.sh prints")

    # Keep TF on the machine's cores (2 on the bench machine): both op pools
    # are capped; tf.data's own pool already defaults to the core count.
    # Must happen before TF runs any op.
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)

    ds = build_pipeline(tf, keras, args.data, args.batch_size)
    log(f"tensorflow {tf.__version__}, keras {keras.__version__}; batch "
        f"{args.batch_size}, {args.threads} threads; warmup {args.warmup}, "
        f"timed {args.batches}")

    result = time_batches(iter(ds), args.warmup, args.batches, "tfdata", "w2",
                          log, describe=lambda x: f"{tuple(x.shape)} {x.dtype.name}")
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
