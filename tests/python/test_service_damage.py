"""Batches damaged on the way from a worker to its client, through the
public CLI and Python API: a worker that advertises 127.0.0.2 is reached
through a proxy there that flips a byte in every copy of a marker the data
carries, so each batch of the stream fails its CRC at the client, every
time it is sent again."""

import re
import signal
import socket
import subprocess
import sys

import pytest

from conftest import TcpProxy, start_server

MARKER = b"sluice-marker-16"
DAMAGED = b"Sluice-marker-16"

# The consumer: 64 rows of 4 KiB of markers in splits of 16, over TCP (the
# proxy's address is on this host: shared memory would pass it by).
_CONSUMER = r"""
import sys
import numpy as np
import sluice
rows = np.frombuffer(%r * 256, np.uint8)
pipe = (sluice.arrays({"id": np.arange(64, dtype=np.int64), "blob": np.tile(rows, (64, 1))}, split_records=16)
        .distribute(sys.argv[1], shared_memory_mb=-1, connect_timeout_s=30)
        .batch(4))
for batch in pipe:
    print(" ".join(str(int(i)) for i in batch["id"]), flush=True)
print("end", flush=True)
""" % MARKER


def test_a_split_whose_batches_always_arrive_damaged_fails_the_epoch_naming_it_and_its_worker():
    try:
        listener = socket.create_server(("127.0.0.2", 0))
    except OSError as e:
        pytest.skip(f"no 127.0.0.2 on this host's loopback: {e}")
    listener.close()
    dispatcher, port = start_server(["dispatcher", "--host", "127.0.0.1", "--port", "0"])
    address = f"127.0.0.1:{port}"
    worker, worker_port = start_server(["worker", "--dispatcher", address, "--host", "127.0.0.1",
                                        "--advertise", "127.0.0.2", "--threads", "1"])
    proxy = TcpProxy(worker_port, host="127.0.0.2", port=worker_port,
                     reply=lambda chunk: chunk.replace(MARKER, DAMAGED))
    try:
        consumer = subprocess.run([sys.executable, "-c", _CONSUMER, address], capture_output=True, text=True,
                                  timeout=300)  # a hang guard: without a cap the epoch never ends
    finally:
        proxy.cut()
        for process in (worker, dispatcher):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    assert consumer.returncode != 0, consumer.stdout
    assert consumer.stdout.strip() == "", consumer.stdout  # no batch passed as whole
    error = consumer.stderr.strip().split("\n")[-1]
    # A split the worker had taken when the client dropped the stream runs
    # again at once (its lease of 30 s would count a failure against it): the
    # client's count of damaged arrivals ends the epoch, not the dispatcher's.
    assert re.search(rf"DataLossError: job \d+: split \d arrived damaged 3 times from worker 1 at "
                     rf"127\.0\.0\.2:{worker_port} \(last: batch of split \d: CRC32C mismatch\)", error), \
        consumer.stderr
    assert worker.returncode == 0  # it stopped on SIGTERM, not before
