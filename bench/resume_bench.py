"""Checkpoint and resume on the reference workloads: the state's size, the
time to save it, and the time to the first batch after a restore against a
fresh start, through the CLI as a restarted training job would run it.

    .venv/bin/python bench/resume_bench.py [--data data] [--runs 5]

For each pipeline, cut early (after 3 batches) and late (after two thirds
of the epoch's batches): `sluice run P --stop-after K --save-state S` (a
fresh start, stopped after K batches), then `sluice run P --resume S
--stop-after 1`; fresh and resumed runs alternate, medians. "First batch"
is from the start of the run (the pipeline compiled) to the first batch
out. The pipelines are pipelines/*.json; "indexed" reads an indexed copy
of the TFRecords in record ranges of 1,024; "shuffle buffer" shuffles the
records in a buffer of 10,000 before decoding them, where tf.data's guides
place it; "unordered" delivers batches as they complete; "through the
service" runs the source and first map on 2 embedded workers (its state
holds the job's progress; a restore has the dispatcher take it over);
"large records" is W3's images decoded and center-cropped once (`sluice
materialize`) into two TFRecord files of 150 KB records without an index,
as a job's own shards often are. `--only TEXT` runs the pipelines whose
name contains TEXT; `--sluice PATH` runs another build's CLI. Prints a
table, then one JSON line.
"""

import argparse
import copy
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import sluice

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
SLUICE = os.path.join(ROOT, "build", "src", "sluice", "cli", "sluice")


def load(name, data):
    with open(os.path.join(ROOT, "pipelines", name)) as f:
        text = f.read().replace('"data/', f'"{data}/')
    return json.loads(text)


def pipelines(data, tmp):
    w2 = load("w2_cifar10.json", data)
    indexed = copy.deepcopy(w2)
    copies = os.path.join(tmp, "cifar10-indexed")
    os.makedirs(copies)
    for path in glob.glob(f"{data}/cifar10/*.tfrecord"):
        shutil.copy(path, copies)
    subprocess.run([SLUICE, "index", *glob.glob(f"{copies}/*.tfrecord")], check=True, capture_output=True)
    indexed["nodes"][0]["source"]["tfrecord"]["files"] = [f"{copies}/*.tfrecord"]
    indexed["nodes"][0]["source"]["split_records"] = 1024
    def shuffled(pipe):
        pipe = copy.deepcopy(pipe)
        pipe["nodes"].insert(1, {"shuffle": {"buffer_size": 10000}})
        return pipe

    unordered = copy.deepcopy(w2)
    unordered.setdefault("options", {})["unordered"] = True
    served = copy.deepcopy(w2)  # the decoded images cross the wire; the client batches and augments
    served["nodes"].insert(2, {"distribute": {"local_workers": 2}})
    w1, w3 = load("w1_mnist.json", data), load("w3_imagenet.json", data)
    w2_batches = batches(indexed)
    large = large_records(w3, tmp)
    return [("W1 (MNIST, blur)", w1, batches(w1)),
            ("W2 (CIFAR-10 TFRecords, no index)", w2, w2_batches),
            ("W2, indexed", indexed, w2_batches),
            ("W2, shuffle buffer 10,000", shuffled(w2), w2_batches),
            ("W2, indexed, shuffle buffer 10,000", shuffled(indexed), w2_batches),
            ("W2, unordered", unordered, w2_batches),
            ("W2 through the service (2 embedded workers)", served, w2_batches),
            ("W3 (JPEG folders, shuffled)", w3, batches(w3)),
            ("W3 decoded, large records (two TFRecord files, no index)", large, batches(w3))]


def large_records(w3, tmp):
    """W3 from two TFRecord files of its images decoded and center-cropped
    (150 KB records), unindexed: `sluice materialize` writes a file per
    record, concatenated here into two."""
    prefix = copy.deepcopy(w3)
    prefix["nodes"][1:2] = [{"map": {"ops": [{"op": "decode_resize_center_crop", "attrs": {"resize": 256, "crop": 224}}]}},
                            {"map": {"ops": [{"op": "crop_mirror_normalize", "attrs": {"mirror": 0.5}}]}}]
    prefix["nodes"][0]["source"].pop("shuffle_splits", None)
    path, out = os.path.join(tmp, "prefix.json"), os.path.join(tmp, "materialized")
    with open(path, "w") as f:
        json.dump(prefix, f)
    subprocess.run([SLUICE, "materialize", path, "--out", out], check=True, capture_output=True)
    with open(os.path.join(out, "pipeline.json")) as f:
        pipe = json.load(f)
    parts = sorted(glob.glob(f"{out}/part-*.tfrecord"))
    files = []
    for i, chunk in enumerate((parts[:len(parts) // 2], parts[len(parts) // 2:])):
        files.append(os.path.join(tmp, f"large-{i}.tfrecord"))
        with open(files[-1], "wb") as whole:
            for part in chunk:
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, whole)
    tfrecord = pipe["nodes"][0]["source"]["tfrecord"]
    tfrecord["files"] = files
    shutil.rmtree(out)
    return pipe


def batches(pipe):
    """Batches per epoch."""
    return len(sluice.Pipeline.from_json(json.dumps(pipe)))


def run(args):
    out = subprocess.run([SLUICE, "run", *args], check=True, capture_output=True, text=True).stdout
    first = float(re.search(r"first element after ([\d.]+) ms", out).group(1))
    saved = re.search(r"state \((\d+) bytes\) saved to .* in ([\d.]+) ms", out)
    return first, (int(saved.group(1)), float(saved.group(2))) if saved else None


def main(argv=None):
    global SLUICE
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--only", default="", help="run only the pipelines whose name contains this")
    p.add_argument("--sluice", default=SLUICE, help="the sluice CLI to run (another build's)")
    a = p.parse_args(argv)
    SLUICE = a.sluice
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, pipe, epoch_batches in pipelines(a.data, tmp):
            if a.only not in name:
                continue
            path = os.path.join(tmp, "pipe.json")
            with open(path, "w") as f:
                json.dump(pipe, f)
            for cut in (3, epoch_batches * 2 // 3):
                fresh, resumed, sizes, saves = [], [], [], []
                for _ in range(a.runs):
                    state = os.path.join(tmp, "state")
                    first, (size, save_ms) = run([path, "--stop-after", str(cut), "--save-state", state])
                    fresh.append(first)
                    sizes.append(size)
                    saves.append(save_ms)
                    resumed.append(run([path, "--resume", state, "--stop-after", "1"])[0])
                row = {"pipeline": name, "cut": cut, "state_bytes": max(sizes),
                       "save_ms": statistics.median(saves), "first_fresh_ms": statistics.median(fresh),
                       "first_resumed_ms": statistics.median(resumed)}
                row["ratio"] = row["first_resumed_ms"] / row["first_fresh_ms"]
                rows.append(row)
                print(f"{name}, cut {cut}: state {row['state_bytes']} B, save {row['save_ms']:.2f} ms, first batch "
                      f"{row['first_fresh_ms']:.1f} ms fresh, {row['first_resumed_ms']:.1f} ms resumed "
                      f"({row['ratio']:.2f})", file=sys.stderr, flush=True)
    print("| pipeline | cut (batches) | state | save | first batch, fresh | first batch, resumed | resumed / fresh |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['pipeline']} | {r['cut']} | {r['state_bytes']} bytes | {r['save_ms']:.2f} ms | "
              f"{r['first_fresh_ms']:.1f} ms | {r['first_resumed_ms']:.1f} ms | {r['ratio']:.2f} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
