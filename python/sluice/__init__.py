"""sluice: a fast input pipeline engine for deep-learning training.

Build a pipeline from a source, chain ops, batch, and iterate::

    import sluice
    from sluice import ops

    pipe = (sluice.mnist("data/mnist/MNIST/raw/train-images-idx3-ubyte",
                         "data/mnist/MNIST/raw/train-labels-idx1-ubyte")
            .map(ops.normalize(mean=0.1307, std=0.3081, scale=1 / 255),
                 ops.gaussian_blur(ksize=11, sigma=[0.1, 2.0]))
            .batch(8192))
    for batch in pipe:          # dicts of numpy arrays sharing sluice's buffers
        images, labels = batch["image"], batch["label"]

The work runs in sluice's C++ engine; this package builds the pipeline
definition (the same PipelineDef JSON `sluice run` takes) and hands batches
over without copying. `sluice.torch` yields torch tensors.
"""

from sluice import _sluice, ops
from sluice._sluice import (CancelledError, DataLossError, DeadlineExceededError, InvalidArgumentError,
                            NotFoundError, PermissionDeniedError, SluiceError, UnavailableError, UnimplementedError)
from sluice.pipeline import (Pipeline, arrays, arrow_ipc, cifar10, file_list, from_arrow, image_folder, mnist,
                             parquet, tfrecord, webdataset)
from sluice.datasets import from_dataset, from_generator
from sluice.service import dispatcher_status

# The loaded libsluice's version: the one of the package, the command and
# the C++ library (CMakeLists.txt's project() is its one source).
__version__ = _sluice.__version__


def load_plugin(path):
    """Loads a C++ op plugin (a .so built against this sluice's headers with
    SLUICE_PLUGIN, see examples/plugin_op) into this process: its ops join
    `sluice.ops` and run in every pipeline like built-in ones. Loading a
    path twice is a no-op; a wrong ABI, a missing symbol or a name already
    taken raise InvalidArgumentError naming the file."""
    _sluice.load_plugin(str(path))
    ops._refresh()


def device_decode_stats():
    """Where the images of decode ops in maps on device "cuda" were decoded,
    counted over this process: {"hardware": n, "cuda": n, "cpu": n,
    "decoder": "..."}. "hardware" is the GPU's JPEG engines, "cuda" nvJPEG's
    CUDA decoder, "cpu" the files the GPU does not decode (PNG, WebP, netpbm,
    CMYK JPEGs, files nvJPEG fails on), decoded on the CPU within the same
    batch. "decoder" names what decodes on the GPU (empty before any
    decode). See docs/gpu.md."""
    return _sluice.device_decode_stats()


def object_store_stats():
    """Object stores' transient failures (5xx, connections refused or reset,
    timeouts) retried so far in this process, and the opens that found their
    object already opened ahead (a source opens its next split's object
    while it reads one): {"retries": n, "opened_ahead": n}; with an object
    cache (Pipeline.cache_objects), "cache": its folder and counts of hits,
    misses, corrupt entries fetched again, entries evicted, objects not
    cached (larger than the bound, or a full disk) and the bytes it holds.
    See docs/formats.md, "Object stores"."""
    return _sluice.object_store_stats()


def serve_metrics(port=0, host="127.0.0.1"):
    """Serves Prometheus metrics of this process's pipelines on
    http://HOST:PORT/metrics and returns the port (`port` 0: any free one).
    Each live pipeline, labelled by its number in the process, reports the
    samples and elements it delivered and its consumer's time waiting for
    them (counted from this call on), the engine's bytes by kind and its
    budget, and its placement: threads, local workers and, under
    placement="auto", every decision's count, the latest one's text, the
    last measured window and the alternatives' predicted rates. One
    endpoint per process: calling again returns the same port (a different
    `port` raises). Under torchrun give each rank its own port, as
    `9400 + int(os.environ["LOCAL_RANK"])`. See docs/placement.md,
    "Metrics"."""
    return _sluice.serve_metrics(host, int(port))


__all__ = [
    "__version__",
    "Pipeline", "tfrecord", "mnist", "cifar10", "arrays", "image_folder", "file_list", "webdataset", "parquet",
    "arrow_ipc", "from_arrow", "from_dataset", "from_generator", "ops",
    "SluiceError", "InvalidArgumentError", "NotFoundError", "DataLossError",
    "CancelledError", "PermissionDeniedError", "UnavailableError", "DeadlineExceededError", "UnimplementedError",
    "load_plugin", "dispatcher_status", "device_decode_stats",
    "object_store_stats", "serve_metrics",
]
