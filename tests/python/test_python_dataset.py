"""sluice.from_dataset: a map-style Python dataset (a torch Dataset as it
is) as a source, its items made in Python processes: every index exactly
once per epoch, the items' values unchanged, the same through a real
worker process and into a torch training loop, and errors that name the
index."""

import numpy as np
import pytest

import sluice
import sluice.torch

import user_code


def _epoch(pipe, epoch=0):
    return [int(label) for batch in pipe.iterate(epoch=epoch) for label in batch["label"]]


def test_a_torch_dataset_gives_each_index_once_an_epoch_with_its_values():
    pipe = sluice.from_dataset(user_code.Squares(1000), names=("image", "label"), processes=2).batch(64)
    labels = []
    for batch in pipe:
        assert batch["image"].dtype == np.uint8 and batch["image"].shape[1:] == (4, 4, 3)
        assert (batch["image"] == (batch["label"] % 256)[:, None, None, None].astype(np.uint8)).all()
        labels += [int(i) for i in batch["label"]]
    assert sorted(labels) == list(range(1000))
    assert labels != sorted(labels)  # splits shuffled
    assert sorted(_epoch(pipe, 1)) == list(range(1000)) and _epoch(pipe, 1) != labels  # reshuffled per epoch


def test_a_shuffled_dataset_mixes_single_items_as_dataloader_does():
    # Sorted by class, as ImageFolder is (10 classes of 1000): splits of 64
    # consecutive indices shuffled as runs gave 4.1 classes a batch of 256;
    # DataLoader(shuffle=True) gives 9.97.
    pipe = sluice.from_dataset(user_code.SortedByClass(10, 1000), processes=1).batch(256).with_options(seed=5)
    epochs = [[batch["label"].tolist() for batch in pipe.iterate(epoch=e)] for e in (0, 1)]
    for batches in epochs:
        assert np.mean([len(set(b)) for b in batches[:-1]]) >= 9.5
        assert sorted(sum(batches, [])) == sorted(i // 1000 for i in range(10000))
    assert epochs[0] != epochs[1]
    again = [batch["label"].tolist() for batch in pipe.iterate(epoch=0)]
    assert again == epochs[0]  # one order per (seed, epoch)


def test_a_dataset_that_opens_its_file_on_first_use_makes_two_pipelines(tmp_path):
    # from_dataset made dataset[0] of the trainer's object, which then held
    # its file open: a second pipeline of it (an eval loader) could not
    # pickle it.
    (tmp_path / "bytes").write_bytes(bytes(range(200)))
    dataset = user_code.LazyFile(tmp_path / "bytes")
    train, evaluate = (sluice.from_dataset(dataset, processes=1).batch(50) for _ in range(2))
    assert dataset.file is None
    for pipe in (train, evaluate):
        assert sorted(int(v) for b in pipe for v in b["byte"]) == list(range(200))


def test_the_order_does_not_depend_on_the_processes():
    orders = [_epoch(sluice.from_dataset(user_code.Squares(500), names=("image", "label"), processes=p)
                     .batch(50).with_options(seed=3)) for p in (1, 3)]
    assert orders[0] == orders[1]


def test_through_a_worker_process_every_index_arrives_once():
    pipe = (sluice.from_dataset(user_code.Squares(600), names=("image", "label"), processes=2, split_records=50)
            .distribute(local_workers=1).batch(32))
    assert sorted(_epoch(pipe)) == list(range(600))


def test_a_dataset_slow_to_load_registers_within_the_clients_wait_not_10_s():
    # The dispatcher gave the worker describing it 10 s, and the client
    # said its own 30 s had run out.
    pipe = (sluice.from_dataset(user_code.SlowToLoad(64, seconds=11), names=("image", "label"), processes=1)
            .distribute(local_workers=1).batch(32))
    assert sorted(_epoch(pipe)) == list(range(64))


def test_a_dataset_named_by_its_factory_is_made_in_each_process():
    pipe = sluice.from_dataset("user_code:make_squares", names=("image", "label"), processes=2).batch(40)
    assert sorted(_epoch(pipe)) == list(range(200))


def test_bytes_of_any_length_and_python_scalars_keep_their_values():
    rows = {}
    for row in sluice.from_dataset(user_code.Blobs(), processes=2):
        assert row["score"].dtype == np.float32
        rows[int(row["score"] * 2)] = (bytes(row["blob"]), bytes(row["tail"]))
    assert rows == {i: (user_code.blob(i), bytes([255 - i % 256]) * (i * 7 % 13)) for i in range(120)}


def test_a_batch_of_bytes_is_a_list_of_each_samples_bytes():
    rows, sizes = {}, []
    for batch in sluice.from_dataset(user_code.Blobs(), processes=2).batch(50):
        assert isinstance(batch["blob"], list) and isinstance(batch["tail"], list)
        sizes.append(len(batch["blob"]))
        scores = batch["score"].reshape(len(batch["blob"]), -1)[:, 0]
        for score, blob, tail in zip(scores, batch["blob"], batch["tail"]):
            rows[int(score * 2)] = (bytes(blob), bytes(tail))
    assert sorted(sizes) == [20, 50, 50]
    assert rows == {i: (user_code.blob(i), bytes([255 - i % 256]) * (i * 7 % 13)) for i in range(120)}


def test_into_a_torch_training_loop():
    import torch

    loader = sluice.torch.TorchIterable(
        sluice.from_dataset(user_code.Squares(512), names=("image", "label"), processes=2).batch(64))
    model = torch.nn.Linear(48, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    seen = 0
    for batch in loader:
        x = batch["image"].reshape(len(batch["label"]), -1).float()
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), batch["label"].float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen += len(batch["label"])
    assert seen == 512 and loader.samples == 512


@pytest.mark.parametrize("how, says", [
    ("raise", "python dataset 'Faulty' failed making dataset\\[37\\]:.*RuntimeError: index 37 is missing on disk"),
    ("shape", "dataset\\[37\\]\\['x'\\] is float32\\[3, 3\\], declared float32\\[2, 2\\]"),
    ("exit", "python dataset 'Faulty': its Python process \\(pid \\d+\\) exited with status 5 making dataset\\[37\\]"),
    ("image", "dataset\\[37\\]\\['x'\\] is uint8\\[6, 5, 3\\].*images=\\['x'\\]"),
    ("tokens", "dataset\\[37\\]\\['x'\\] is int32\\[5\\].*pad them to one length"),
    ("none", "dataset\\[37\\] is None: did the function return or yield nothing\\?"),
    ("str", "dataset\\[37\\]\\['x'\\] is a str: encode it \\(s.encode\\(\\)\\) to hold it as bytes"),
])
def test_a_failing_item_is_an_error_naming_its_index(how, says):
    pipe = sluice.from_dataset(user_code.Faulty(how), processes=2).batch(10)
    with pytest.raises(sluice.SluiceError, match=f"(?s){says}"):
        list(pipe)


def test_an_op_failing_on_a_shuffled_datasets_item_names_that_item():
    # It named the item's place in the epoch's shuffled order as its index.
    pipe = (sluice.from_dataset(user_code.Squares(100), names=("image", "id"), processes=1, shuffle=True)
            .map(sluice.ops.python(user_code.fails_on_37, inputs="id")).batch(10))
    with pytest.raises(sluice.SluiceError, match=r"failed on dataset\[37\] \(record \d+ of Squares\)"):
        list(pipe)


def test_an_empty_dataset_or_a_wrong_name_count_is_refused():
    with pytest.raises(ValueError, match="empty"):
        sluice.from_dataset(user_code.Squares(0))
    with pytest.raises(ValueError, match="3 names for items of 2 values"):
        sluice.from_dataset(user_code.Squares(5), names=("a", "b", "c"))
    # Named at once, not a KeyError on the first item made.
    with pytest.raises(TypeError, match=r"dataset\[0\]: a dict whose keys \[0, 1\] are not strings"):
        sluice.from_dataset([{0: 1, 1: 2}] * 3)
    # One of two columns named alike was dropped from every batch.
    with pytest.raises(ValueError, match=r"names repeat \['x'\]: each column needs a name of its own"):
        sluice.from_dataset(user_code.Squares(5), names=("x", "x"))
    with pytest.raises(ValueError, match=r"a dict item names its columns by its keys \['a'\]"):
        sluice.from_dataset([{"a": 1}] * 3, names=("b",))
    for bad, error in ((-1, ValueError), (257, ValueError), ("2", TypeError)):
        with pytest.raises(error, match="processes must be"):
            sluice.from_dataset(user_code.Squares(5), processes=bad)
        with pytest.raises(error, match="processes must be"):
            sluice.ops.python(user_code.invert, processes=bad)


def test_a_tuple_of_integers_and_floats_is_refused_not_made_floats():
    # (x, (weight, sample_id)) was one float32 column: ids past 2**24 lost
    # their last digits, and two samples shared one.
    items = [(np.zeros(2, np.float32), (0.5, 2 ** 24 + 1 + i)) for i in range(4)]
    with pytest.raises(TypeError, match=r"'1' is a tuple of integers and floats, which one array would hold as "
                                        r"floats, losing the integers' digits"):
        sluice.from_dataset(items)
    with pytest.raises(TypeError, match=r"'meta' is a list of integers and floats"):
        sluice.from_dataset([{"meta": [0.5, [2 ** 40 + i]]} for i in range(4)])
    flat = sluice.from_dataset([(np.zeros(2, np.float32), 0.5, 2 ** 24 + 1 + i) for i in range(4)], shuffle=False)
    assert next(iter(flat.batch(4)))["2"].tolist() == [2 ** 24 + 1 + i for i in range(4)]


def test_a_value_numpy_cannot_hold_is_refused_naming_its_column():
    import torch

    class Half:
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return {"x": torch.zeros(3, dtype=torch.bfloat16), "label": i}

    with pytest.raises(TypeError, match=r"from_dataset: dataset\[0\]: 'x' is no numpy array \(.*BFloat16.*\).*"
                                        r"a bfloat16 tensor: \.float\(\)"):
        sluice.from_dataset(Half())


def test_an_iterator_outliving_its_pipeline_object_still_reads():
    import gc

    it = iter(sluice.from_dataset(user_code.Squares(100), names=("image", "label"), processes=1).batch(10))
    gc.collect()  # the Pipeline is gone; its dataset's pickle must not be
    assert sorted(int(i) for batch in it for i in batch["label"]) == list(range(100))


def test_a_checkpoint_resumes_in_a_pipeline_made_again():
    def make():
        return sluice.from_dataset(user_code.Squares(300), names=("image", "label"), processes=1).batch(25)

    it = make().iterate()
    first = [int(i) for _ in range(4) for i in next(it)["label"]]
    state = it.state()
    rest = [int(i) for batch in make().iterate(state=state) for i in batch["label"]]  # another pickle file
    assert sorted(first + rest) == list(range(300))


_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import sluice
import user_code


def triple(i):  # the script's own function, held by an importable class
    return np.int64(3 * i)


if __name__ == "__main__":
    pipe = sluice.from_dataset(user_code.Mapped(50, triple), processes=1, shuffle=False)
    print(" ".join(str(int(row["0"])) for row in pipe))
"""


def test_a_dataset_holding_a_function_of_the_script_being_run_loads(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    done = subprocess.run([sys.executable, str(script), os.path.dirname(os.path.abspath(__file__))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(3 * i) for i in range(50)]


def test_a_datasets_pickle_missing_where_it_is_loaded_says_to_name_a_function():
    # What a worker on another machine finds: the pickle is on the trainer's.
    from sluice import _python_worker
    with pytest.raises(FileNotFoundError, match=r"is not here.*sluice.from_dataset\(\"module:function\"\)"):
        _python_worker._load_dataset("pickle:/nonexistent/sluice-dataset-x.pickle", False)


_KILLED_TRAINER = (
    "import numpy as np, sluice\n"
    "pipe = sluice.from_dataset([{'x': np.int64(i)} for i in range(10)])\n"
    "print('made', flush=True)\n"
    "input()\n")


def _start_other_trainer(tmp_path, monkeypatch):
    """Another trainer, of _KILLED_TRAINER's dataset, once it has made its
    pipeline; its dataset files and this process's in tmp_path."""
    import os
    import subprocess
    import sys
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", _KILLED_TRAINER], env=dict(os.environ, TMPDIR=str(tmp_path)),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if child.stdout.readline() != "made\n":
        child.kill()
        pytest.fail("the other trainer did not make its pipeline")
    return child


def test_the_dataset_file_of_a_trainer_killed_9_is_removed_by_the_next_one(tmp_path, monkeypatch):
    # Each trainer killed with SIGKILL left its dataset's pickle in /tmp.
    import os
    import signal
    child = _start_other_trainer(tmp_path, monkeypatch)
    try:
        [left] = os.listdir(tmp_path)
        os.utime(tmp_path / left, (0, 0))  # older than a writer's moment before its lock
        sluice.from_dataset([{"x": np.int64(1)}])
        assert left in os.listdir(tmp_path)  # its trainer lives: kept
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    kept = sluice.from_dataset([{"x": np.int64(2)}])
    files = os.listdir(tmp_path)
    assert left not in files and len(files) == 1, files  # this process's live one stays
    assert [int(b["x"]) for b in kept] == [2]


def test_trainers_of_the_same_dataset_share_its_file_which_goes_with_the_last(tmp_path, monkeypatch):
    # Each trainer wrote a file of its own: a shared job served the first
    # consumer's, which went when that consumer left (a new worker then
    # could not load the dataset), and a script run again never found the
    # workers' pipeline of the run before.
    import os
    child = _start_other_trainer(tmp_path, monkeypatch)
    try:
        [theirs] = os.listdir(tmp_path)
        first = sluice.from_dataset([{"x": np.int64(i)} for i in range(10)])
        second = sluice.from_dataset([{"x": np.int64(i)} for i in range(10)])
        assert os.listdir(tmp_path) == [theirs]  # one file for the three
        del first
        assert os.listdir(tmp_path) == [theirs]
        assert sorted(int(b["x"]) for b in second) == list(range(10))
        del second
        assert os.listdir(tmp_path) == [theirs]  # the other trainer still holds it
    finally:
        child.communicate("\n", timeout=60)
    assert os.listdir(tmp_path) == []  # the last holder removed it


def test_a_memmap_a_dataset_or_function_holds_goes_by_its_file_not_its_bytes(tmp_path, monkeypatch):
    # Pickled by value, a 200 MB token file was copied into the pipeline
    # and into each process.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    np.arange(1 << 22, dtype=np.uint16).tofile(tmp_path / "train.bin")  # 8 MiB
    tokens = np.memmap(tmp_path / "train.bin", dtype=np.uint16, mode="r")
    pipe = sluice.from_dataset(user_code.TokenWindows(tokens[1024:], 256), processes=1, shuffle=False).batch(64)
    first = next(iter(pipe))["x"]
    np.testing.assert_array_equal(first, np.arange(1024, 1024 + 64 * 256).reshape(64, 256))
    pickles = list(tmp_path.glob("sluice-dataset-*.pickle"))
    assert len(pickles) == 1 and pickles[0].stat().st_size < 64 << 10

    def window(sample):
        i = int(sample["i"])
        return {"x": np.asarray(tokens[i * 8:i * 8 + 8], np.int32)}
    op = (sluice.arrays({"i": np.arange(100, dtype=np.int64)})
          .map(sluice.ops.python(window, {"x": ("int32", (8,))}, processes=1)).batch(100))
    assert len(op.to_json()) < 64 << 10
    np.testing.assert_array_equal(next(iter(op))["x"], np.arange(800).reshape(100, 8))


@pytest.mark.parametrize("ending", ["", "import sluice.torch; sluice.torch.exit_rank()"])
def test_a_dataset_file_goes_with_the_process_that_held_its_pipeline(tmp_path, ending):
    # A loader held in a global outlived the interpreter's collection, and
    # exit_rank skipped it: its file stayed in /tmp.
    import os
    import subprocess
    import sys
    script = (f"import sys; sys.path.insert(0, {os.path.dirname(user_code.__file__)!r})\n"
              "import sluice, user_code\n"
              "pipe = sluice.from_dataset(user_code.Squares(100), names=('image', 'label'), processes=1).batch(10)\n"
              f"next(iter(pipe))\n{ending}\n")
    subprocess.run([sys.executable, "-c", script], env=dict(os.environ, TMPDIR=str(tmp_path)), check=True,
                   timeout=120)
    assert not list(tmp_path.glob("sluice-dataset-*"))



_PICKLED_THEN_DROPPED = """
import gc, glob, os, pickle, subprocess, sys, warnings
warnings.simplefilter("error", ResourceWarning)
sys.path.insert(0, sys.argv[1])
import sluice, user_code
pipe = sluice.from_dataset(user_code.Squares(20), names=("image", "label"), processes=1).batch(20)
sent = pickle.dumps(pipe)
del pipe
gc.collect()  # a spawn child still starting, or a Ray task, has only the pickle
child = ("import pickle, sys; sys.path.insert(0, sys.argv[1]); "
         "print(sorted(int(v) for v in next(iter(pickle.loads(sys.stdin.buffer.read())))['label']))")
ran = subprocess.run([sys.executable, "-c", child, sys.argv[1]], input=sent, capture_output=True, check=True)
print(ran.stdout.decode().strip(), len(glob.glob(os.path.join(os.environ["TMPDIR"], "sluice-dataset-*"))))
"""


def test_a_pickled_pipeline_loads_after_the_one_it_was_made_from_is_collected(tmp_path):
    # Its dataset file went with the collected object: the child failed
    # saying the file was "not on this machine". Kept until exit, then gone.
    import os
    import subprocess
    import sys
    ran = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", _PICKLED_THEN_DROPPED,
                          os.path.dirname(user_code.__file__)], env=dict(os.environ, TMPDIR=str(tmp_path)),
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split("] ") == [str(list(range(20)))[:-1], "1\n"], ran.stdout
    assert "ResourceWarning" not in ran.stderr, ran.stderr
    assert not list(tmp_path.glob("sluice-dataset-*"))
