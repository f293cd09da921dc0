"""Prometheus metrics of a real dispatcher and worker, scraped over HTTP
while a job runs: the values move as the job does."""

import http.server
import json
import re
import signal
import subprocess
import threading
import time
import urllib.request

import numpy as np
import pytest

import sluice
from sluice import ops

ROWS = 4000


def _start(args):
    """Starts `sluice ARGS --metrics-port 0`; returns (process, port, metrics port)."""
    process = subprocess.Popen(["sluice", *args, "--metrics-port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    listening, metrics = process.stdout.readline(), process.stdout.readline()
    assert "listening on port" in listening and "metrics on port" in metrics, (listening, metrics)
    return process, int(listening.split()[-1]), int(metrics.split()[-1])


def _scrape(port):
    """{(name, labels text): value} of one scrape."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if m:
            values[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return values


def _find(values, name, **labels):
    for (n, text), value in values.items():
        if n == name and all(f'{k}="{v}"' in text for k, v in labels.items()):
            return value
    raise AssertionError(f"no {name} {labels} in {sorted(k for k in values if k[0].startswith('sluice'))}")


def _wait_for(port, condition):
    """The first scrape that meets `condition`; 30 s is a hang guard, not a timing assertion."""
    for _ in range(300):
        values = _scrape(port)
        if condition(values):
            return values
        time.sleep(0.1)
    raise AssertionError(f"no scrape of port {port} met the condition in 30 s")


# A job's name is the user's text: a newline in it stays escaped, in the
# metrics and in `sluice status`, never a line of its own.
JOB = "metered\nFAKE line"
JOB_LABEL = r"metered\nFAKE line"


def test_metrics_move_as_a_job_runs():
    dispatcher, port, dispatcher_metrics = _start(["dispatcher", "--host", "127.0.0.1", "--port", "0",
                                                   "--worker-timeout", "1"])
    address = f"127.0.0.1:{port}"
    worker, _, worker_metrics = _start(["worker", "--dispatcher", address, "--host", "127.0.0.1",
                                        "--threads", "1"])
    try:
        before = _scrape(worker_metrics)
        assert _find(before, "sluice_worker_samples_sent_total") == 0
        assert _find(before, "sluice_worker_engine_bytes", kind="in_use") == 0  # no pipeline yet
        assert _find(before, "sluice_worker_object_store_retries_total") == 0  # no object read yet
        _wait_for(dispatcher_metrics, lambda v: _find(v, "sluice_workers") == 1)  # the worker registered
        for role, metrics in (("dispatcher", dispatcher_metrics), ("worker", worker_metrics)):
            # It read as a training process with no pipelines.
            shown = subprocess.run(["sluice", "status", "--process", f"127.0.0.1:{metrics}"], capture_output=True,
                                   text=True, timeout=60)
            assert shown.returncode == 1 and f"serves a {role}'s metrics, not a training" in shown.stderr, shown
        pipe = (sluice.arrays({"id": np.arange(ROWS, dtype=np.int64),
                               "image": np.zeros((ROWS, 8, 8, 3), np.uint8)}, split_records=100)
                .map(ops.resize(size=[64]))
                .distribute(address, job_name=JOB)
                .batch(10))
        rate, seen = 0.0, 0
        it = iter(pipe)
        for batch in it:  # until the dispatcher has heard the consumer's rate
            seen += len(batch["id"])
            during = _scrape(dispatcher_metrics)
            assert _find(during, "sluice_job_clients", job=JOB_LABEL) == 1
            rate = _find(during, "sluice_job_samples_per_second", job=JOB_LABEL)
            if rate > 0:
                break
            time.sleep(0.01)  # heartbeats come every 200 ms; the epoch lasts 4 s at this pace
        assert rate > 0, "the epoch ended before a heartbeat reported the consumer's rate"
        shown = subprocess.run(["sluice", "status", "--dispatcher", address], capture_output=True, text=True,
                               timeout=60, check=True).stdout
        assert JOB_LABEL in shown and not any(line.startswith("FAKE") for line in shown.splitlines()), shown
        assert _find(during, "sluice_job_workers_needed", job=JOB_LABEL) >= 1
        assert _find(during, "sluice_job_workers", job=JOB_LABEL) == 1
        seen += sum(len(b["id"]) for b in it)
        assert seen == ROWS
        after_worker, after = _scrape(worker_metrics), _scrape(dispatcher_metrics)
        assert _find(after_worker, "sluice_worker_samples_sent_total") >= ROWS
        assert _find(after_worker, "sluice_worker_bytes_sent_total") > ROWS * 64 * 64 * 3
        # The pipeline it ran keeps its buffers for the next epoch (docs/memory.md).
        held = sum(_find(after_worker, "sluice_worker_engine_bytes", kind=k) for k in ("in_use", "cached"))
        assert held >= 10 * 64 * 64 * 3, held  # a batch's worth at least
        assert _find(after, "sluice_job_splits", job=JOB_LABEL, state="done") == ROWS // 100
        assert _find(after, "sluice_job_splits", job=JOB_LABEL, state="pending") == 0
        assert _find(after, "sluice_process_resident_bytes") > 0
        assert not any(name == "sluice_errors_total" for name, _ in after), [k for k in after if "error" in k[0]]

        worker.send_signal(signal.SIGKILL)
        worker.wait()
        # The dispatcher drops it after --worker-timeout 1.
        values = _wait_for(dispatcher_metrics, lambda v: _find(v, "sluice_workers") == 0)
        assert _find(values, "sluice_errors_total", kind="worker_lost") == 1
    finally:
        for process in (worker, dispatcher):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def test_a_worker_drops_a_compiled_pipeline_after_its_idle_timeout_never_while_a_stream_runs_it():
    dispatcher, port, _ = _start(["dispatcher", "--host", "127.0.0.1", "--port", "0"])
    address = f"127.0.0.1:{port}"
    worker, _, worker_metrics = _start(["worker", "--dispatcher", address, "--host", "127.0.0.1", "--threads", "1",
                                        "--idle-pipeline-timeout", "1"])
    try:
        # Samples of 192 KiB: a split of 100 is more than the stream buffers, so
        # the worker's stream stays open while the consumer holds still.
        pipe = (sluice.arrays({"id": np.arange(ROWS, dtype=np.int64),
                               "image": np.zeros((ROWS, 8, 8, 3), np.uint8)}, split_records=100)
                .map(ops.resize(size=[256]))
                .distribute(address, job_name="idle")
                .batch(10))
        it = iter(pipe)
        seen = len(next(it)["id"])
        time.sleep(3)  # three idle timeouts: a stream holds the pipeline the whole time
        during = _scrape(worker_metrics)
        assert _find(during, "sluice_worker_active_streams") == 1
        assert _find(during, "sluice_worker_pipelines") == 1
        seen += sum(len(b["id"]) for b in it)
        assert seen == ROWS
        values = _wait_for(worker_metrics, lambda v: _find(v, "sluice_worker_pipelines") == 0)
        assert sum(_find(values, "sluice_worker_engine_bytes", kind=k) for k in ("in_use", "cached")) == 0
    finally:
        for process in (worker, dispatcher):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def _ids_pipe(rows, **options):
    return (sluice.arrays({"id": np.arange(rows, dtype=np.int64),
                           "image": np.zeros((rows, 8, 8, 3), np.uint8)}, split_records=50)
            .map(ops.random_flip(mode="horizontal"))
            .batch(25)
            .with_options(seed=3, unordered=True, **options))


def test_a_training_process_serves_its_pipelines_metrics():
    port = sluice.serve_metrics()
    assert sluice.serve_metrics() == port == sluice.serve_metrics(port)  # one endpoint per process
    with pytest.raises(sluice.SluiceError, match=f"already serves its metrics on 127.0.0.1:{port}"):
        sluice.serve_metrics(port + 1)
    pipe = _ids_pipe(1500, placement="auto")
    it = pipe.iterate(0)
    seen = sum(len(next(it)["id"]) for _ in range(20))
    assert it._it._move_to(threads=1, local_workers=1)  # the rest of the epoch in a worker process
    seen += sum(len(next(it)["id"]) for _ in range(10))
    report = pipe.placement()
    label = str(report["pipeline"])
    during = _scrape(port)
    assert _find(during, "sluice_pipeline_samples_total", pipeline=label) == seen == 750
    assert _find(during, "sluice_pipeline_elements_total", pipeline=label) == 30
    assert _find(during, "sluice_placement_local_workers", pipeline=label) == 1
    assert _find(during, "sluice_placement_info", pipeline=label, mode="auto",
                 placement=report["running"]["description"]) == 1
    assert report["running"]["local_workers"] == 1
    assert _find(during, "sluice_placement_decisions_total", pipeline=label) == len(report["decisions"])
    assert _find(during, "sluice_pipeline_engine_bytes", pipeline=label, kind="rings") > 0  # the worker's ring
    seen += sum(len(b["id"]) for b in it)
    assert seen == 1500
    after = _scrape(port)
    assert _find(after, "sluice_pipeline_samples_total", pipeline=label) == 1500
    assert _find(after, "sluice_pipeline_wait_seconds_total", pipeline=label) > 0
    memory = pipe.memory()
    for kind in ("in_use", "cached", "rings"):
        assert _find(after, "sluice_pipeline_engine_bytes", pipeline=label, kind=kind) == memory[kind], kind
    for kind in ("object_blocks", "python_shared", "staging", "mapped_files", "columnar", "arrays"):
        assert _find(after, "sluice_process_engine_bytes", kind=kind) == memory[kind], kind
    assert _find(after, "sluice_pipeline_memory_budget_bytes", pipeline=label) == memory["budget"]
    status = json.loads(subprocess.run(["sluice", "status", "--process", f"127.0.0.1:{port}", "--json"],
                                       check=True, capture_output=True, text=True).stdout)
    mine = next(p for p in status["pipelines"] if p["pipeline"] == int(label))
    assert mine["values"]["sluice_pipeline_samples_total"] == 1500
    assert mine["values"]["sluice_placement_local_workers"] == 1
    assert mine["labels"]["placement"] == pipe.placement()["running"]["description"]
    text = subprocess.run(["sluice", "status", "--process", f"127.0.0.1:{port}"], check=True, capture_output=True,
                          text=True).stdout
    assert f"pipeline {label}  auto: {mine['labels']['placement']}" in text, text
    assert "delivered 1,500 samples in 60 elements" in text, text
    del it, pipe
    gone = _scrape(port)
    assert not any(name.startswith("sluice_pipeline_") and f'pipeline="{label}"' in text for name, text in gone)


def test_status_counts_the_decoded_row_groups_in_what_a_pipeline_holds(tmp_path):
    # pipe.memory()'s held counts the process's decoded row groups; `sluice
    # status` showed in use + cached + rings only (6.2 MB of 21.1 MB).
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"image": pa.array([bytes(4096)] * 4000, pa.binary()), "label": list(range(4000))}),
                   tmp_path / "t.parquet", row_group_size=2000, compression="none")
    port = sluice.serve_metrics()
    pipe = sluice.parquet(str(tmp_path / "t.parquet"), shuffle=False).batch(50)
    it = iter(pipe)
    next(it)
    memory = pipe.memory()
    text = subprocess.run(["sluice", "status", "--process", f"127.0.0.1:{port}"], check=True, capture_output=True,
                          text=True).stdout
    line = next(line for line in text.splitlines() if "engine:" in line and "columnar" in line)
    held, columnar = (float(re.search(pattern, line).group(1))
                      for pattern in (r"engine: ([\d.]+) MB held", r"columnar ([\d.]+) MB"))
    assert columnar == pytest.approx(memory["columnar"] / 1e6, abs=0.051), line
    assert held >= columnar + memory["in_use"] / 1e6 - 0.1 and columnar >= 2000 * 4096 / 1e6, line
    del it


def test_sluice_run_serves_the_metrics_of_the_pipeline_it_runs(tmp_path):
    spec = tmp_path / "ids.json"
    spec.write_text(_ids_pipe(1000).to_json())
    run = subprocess.Popen(["sluice", "run", str(spec), "--epochs", "1000000", "--quiet", "--metrics-port", "0"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = run.stderr.readline()
        m = re.match(r"^metrics on http://127\.0\.0\.1:(\d+)/metrics$", line.strip())
        assert m, line
        values = _wait_for(int(m.group(1)), lambda v: v.get(("sluice_pipeline_samples_total", '{pipeline="0"}'), 0) > 0)
        assert _find(values, "sluice_placement_info", pipeline="0", mode="manual") == 1
        assert _find(values, "sluice_pipeline_samples_total", pipeline="0") % 25 == 0  # whole batches
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=30)


def test_status_of_a_process_refuses_an_answer_that_is_no_training_process_metrics():
    class Handler(http.server.BaseHTTPRequestHandler):
        body = b""

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.body)))
            self.end_headers()
            self.wfile.write(self.body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for body in (b"<html>hello</html>", b"", b"go_goroutines 12\n"):
            Handler.body = body
            shown = subprocess.run(["sluice", "status", "--process", f"127.0.0.1:{server.server_port}"],
                                   capture_output=True, text=True, timeout=60)
            assert shown.returncode == 1, (body, shown)
            assert f"http://127.0.0.1:{server.server_port}/metrics answered, but with no training process's " \
                   "metrics" in shown.stderr, (body, shown.stderr)
    finally:
        server.shutdown()
