"""W2 peer on tf.data service: the articles' pipeline with its prefix
(parse, dilation, blur) on a tf.data service worker, the rest (batch,
rescale, flip, rotation, zoom) in the client, as sluice's service bench does.

A DispatchServer runs in this process on 127.0.0.1; the WorkerServer runs
in a second process (as sluice's worker does), `distribute` follows the
blur. Runs in the peer venv (bench/peers/ensure_peer_venv.sh):

    PY bench/peers/w2_tfdata_service.py --data DIR [--batches 20] [--threads 2]

The last line on stdout is one JSON object with "samples_per_s".
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_batches, make_logger,  # noqa: E402
                         print_result, time_batches)
from w2_tfdata import build_pipeline  # noqa: E402

log = make_logger("w2_tfdata_service")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "directory of the W2 TFRecords", 1024)
    p.add_argument("--threads", type=int, default=2, help="TF op threads per process")
    p.add_argument("--serve-worker", metavar="DISPATCHER", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.serve_worker:
        check_batches(p, args)
    return args


def serve_worker(tf, dispatcher):
    worker = tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(dispatcher_address=dispatcher))
    log(f"worker serving for {dispatcher}")
    worker.join()


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf
    import keras
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    if args.serve_worker:
        serve_worker(tf, args.serve_worker)
        return 0

    dispatcher = tf.data.experimental.service.DispatchServer(
        tf.data.experimental.service.DispatcherConfig(port=0))
    address = dispatcher.target.split("://")[1]
    worker = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--data", args.data,
                               "--threads", str(args.threads), "--serve-worker", address])
    try:
        ds = build_pipeline(tf, keras, args.data, args.batch_size, service=dispatcher.target)
        log(f"tensorflow {tf.__version__}: dispatcher {dispatcher.target}, one worker process; "
            f"batch {args.batch_size}; warmup {args.warmup}, timed {args.batches}")
        result = time_batches(iter(ds), args.warmup, args.batches, "tfdata_service", "w2", log,
                              describe=lambda x: f"{tuple(x.shape)} {x.dtype.name}")
    finally:
        worker.terminate()
        worker.wait()
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
