"""Reading a pipeline while comparing what memory() says it holds with the
process's RSS: for the tests of large record batches, local and in a store."""

import numpy as np

MIB = 1 << 20


def rss_anon():
    """The process's resident anonymous pages (not mapped files), in bytes."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:"))


def write_one_record_batch(path, rows, size, seed, compression=None):
    """An Arrow IPC file of one record batch: `image` (`size` random bytes
    a row) and `label` (the row's index). Returns the images' bytes."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    blob = np.random.default_rng(seed).integers(0, 256, rows * size, dtype=np.uint8).tobytes()
    table = pa.table({"image": pa.array([blob[i * size:(i + 1) * size] for i in range(rows)], pa.binary()),
                      "label": pa.array(np.arange(rows, dtype=np.int64))})
    with ipc.new_file(str(path), table.schema, options=ipc.IpcWriteOptions(compression=compression)) as writer:
        writer.write_table(table, max_chunksize=rows)
    return blob


def read_watching(pipe, blob, size, kind, rss):
    """One epoch of `pipe` (over write_one_record_batch's file), each
    batch's first image checked: (the most memory()[kind] rose, the most it
    held, the most `rss()` grew, the labels read in order)."""
    outside = pipe.memory()[kind]  # the process's, before
    base = rss()
    grew = most = most_held = 0
    labels = []
    for batch in pipe:
        labels.extend(batch["label"].tolist())
        first = int(batch["label"][0])
        assert bytes(batch["image"][0]) == blob[first * size:(first + 1) * size]
        m = pipe.memory()
        most, most_held = max(most, m[kind] - outside), max(most_held, m["held"])
        grew = max(grew, rss() - base)
    return most, most_held, grew, labels
