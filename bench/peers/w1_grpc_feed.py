#!/usr/bin/python3
"""W1 peer for the service: the hand-made Python gRPC data feed of the
articles. A feeder process runs W1's torch DataLoader (MNIST, ToTensor,
Normalize, GaussianBlur(11); 2 workers) and puts each batch's bytes on a
multiprocessing queue; a gRPC server process streams them as `bytes`
messages; this process is the client, turning them back into tensors.

Runs under Debian's /usr/bin/python3 (python3-torch, python3-torchvision,
python3-grpcio):

    /usr/bin/python3 bench/peers/w1_grpc_feed.py --data DIR [--batches 10]

The last line on stdout is one JSON object with "samples_per_s".
"""

import argparse
import multiprocessing as mp
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import (add_common_args, check_batches, make_logger,  # noqa: E402
                         print_result, time_batches)

log = make_logger("w1_grpc_feed")
METHOD = "/feed.Feed/Stream"
MAX_MESSAGE = 256 << 20


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p, "MNIST root (contains MNIST/raw/*-ubyte)", 8192,
                    workers_help="DataLoader worker processes")
    args = p.parse_args(argv)
    check_batches(p, args)
    return args


def feed(data, batch_size, workers, queue):
    """The DataLoader of W1, its batches as bytes on `queue`, forever."""
    import torch
    from torchvision import datasets, transforms
    torch.set_num_threads(1)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,)),
                             transforms.GaussianBlur(11)])
    loader = torch.utils.data.DataLoader(
        datasets.MNIST(root=data, train=True, download=False, transform=tf),
        batch_size=batch_size, num_workers=workers, drop_last=True, persistent_workers=True)
    while True:
        for x, y in loader:
            xb, yb = x.numpy().tobytes(), y.numpy().tobytes()
            queue.put(struct.pack("<II", x.shape[0], len(xb)) + xb + yb)


def serve(port_out, queue):
    """A gRPC server streaming the queue's messages to each caller."""
    from concurrent import futures
    import grpc

    def stream(request, context):
        while context.is_active():
            yield queue.get()

    handler = grpc.method_handlers_generic_handler("feed.Feed", {
        "Stream": grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=None, response_serializer=None)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                         options=[("grpc.max_send_message_length", MAX_MESSAGE)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    port_out.put(port)
    server.wait_for_termination()


def main(argv=None):
    args = parse_args(argv)
    import grpc
    import numpy as np
    import torch

    ctx = mp.get_context("fork")
    queue = ctx.Queue(maxsize=4)
    port_q = ctx.Queue()
    # Not a daemon: its DataLoader starts worker processes of its own.
    feeder = ctx.Process(target=feed, args=(args.data, args.batch_size, args.workers, queue))
    server = ctx.Process(target=serve, args=(port_q, queue), daemon=True)
    feeder.start()
    server.start()
    port = port_q.get(timeout=60)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                    options=[("grpc.max_receive_message_length", MAX_MESSAGE)])
    call = channel.unary_stream(METHOD, request_serializer=None, response_deserializer=None)
    log(f"feed on 127.0.0.1:{port}: DataLoader ({args.workers} workers) -> queue -> gRPC; "
        f"batch {args.batch_size}; warmup {args.warmup}, timed {args.batches}")

    def batches():
        for message in call(b""):
            n, xlen = struct.unpack_from("<II", message)
            x = torch.from_numpy(np.frombuffer(message, np.float32, xlen // 4, 8).reshape(n, 1, 28, 28))
            y = torch.from_numpy(np.frombuffer(message, np.int64, n, 8 + xlen))
            yield x, y

    try:
        result = time_batches(batches(), args.warmup, args.batches, "python_grpc_feed", "w1", log)
    finally:
        server.terminate()
        feeder.terminate()
        feeder.join()
    print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
