"""Paths as users pass them: pathlib, names in other encodings, links,
pipes, lists saved with a BOM. Each either reads what a plain path reads or
fails naming the path, never hanging or misnaming the error."""

import os
import subprocess
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sluice


def ids(pipe):
    return sorted(int(v) for b in pipe for v in np.asarray(b["label"]).ravel())


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    out = tmp_path_factory.mktemp("images")
    subprocess.run(["sluice", "make-data", "imagenet", "--out", str(out), "--count", "6", "--classes", "3"],
                   check=True, capture_output=True)
    return out


def test_every_source_takes_pathlib_paths_as_it_takes_strings(tmp_path, cifar_dir):
    table = pa.table({"label": np.arange(20, dtype=np.int64)})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=5)
    with pa.ipc.new_file(str(tmp_path / "t.arrow"), table.schema) as writer:
        writer.write_table(table, max_chunksize=5)
    records = sorted(Path(cifar_dir).glob("*.tfrecord"))
    features = {"label": "int64"}
    for as_path, as_str in [
        (sluice.parquet(tmp_path / "t.parquet"), sluice.parquet(str(tmp_path / "t.parquet"))),
        (sluice.arrow_ipc([tmp_path / "t.arrow"]), sluice.arrow_ipc(str(tmp_path / "t.arrow"))),
        (sluice.tfrecord(records, features), sluice.tfrecord([str(r) for r in records], features)),
        (sluice.tfrecord(Path(cifar_dir) / "*.tfrecord", features),
         sluice.tfrecord(str(records[0].parent / "*.tfrecord"), features)),
    ]:
        assert ids(as_path) == ids(as_str)
    with pytest.raises(TypeError, match=r"parquet: a path is a str or an os.PathLike .* got int"):
        sluice.parquet([tmp_path / "t.parquet", 3])
    with pytest.raises(TypeError, match=r"tfrecord: files are a path, a glob or a list of them, got int"):
        sluice.tfrecord(3)


def test_a_link_from_an_image_folder_to_a_folder_above_it_is_named_as_a_loop(images, tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    jpeg = next(images.glob("class_000/*.jpg"))
    (root / "a" / "x.jpg").write_bytes(jpeg.read_bytes())
    os.symlink(root, root / "a" / "loop")
    with pytest.raises(sluice.InvalidArgumentError, match=r"a/loop links to .*root, a folder above it: a loop"):
        list(sluice.image_folder(root))


def class_folders(root, images, classes, per_class):
    """`per_class` copies of one JPEG in each of `classes`' folders under `root`."""
    jpeg = next(images.glob("class_000/*.jpg")).read_bytes()
    for c in classes:
        (root / c).mkdir(parents=True)
        for i in range(per_class):
            (root / c / f"{i}.jpg").write_bytes(jpeg)
    return root


def test_two_links_each_to_the_others_folder_are_named_as_a_loop(images, tmp_path):
    # a/lb -> b and b/la -> a: each link's target was no folder above its own
    # canonical parent, and every image was listed 41 times.
    root = class_folders(tmp_path / "root", images, ("a", "b"), 1)
    os.symlink("../b", root / "a" / "lb")
    os.symlink("../a", root / "b" / "la")
    with pytest.raises(sluice.InvalidArgumentError, match=r"a/lb/la links to .*root/a, a folder above it: a loop"):
        list(sluice.image_folder(root))


def test_a_state_over_other_class_folders_is_refused_not_resumed_with_shifted_labels(images, tmp_path):
    # An empty folder added (Jupyter's .ipynb_checkpoints) shifted every
    # label after it, file names unchanged: the resumed epoch had labels 1
    # and 2 where it had had 0 and 1.
    root = class_folders(tmp_path / "root", images, ("cat", "dog"), 2)
    it = sluice.image_folder(root, shuffle=False).iterate(0)
    next(it)
    state = it.state()
    (root / "bird").mkdir()
    with pytest.raises(sluice.InvalidArgumentError, match="saved over another listing"):
        list(sluice.image_folder(root, shuffle=False).iterate(state=state))


def test_an_image_folders_link_to_a_missing_image_is_an_error_naming_it(images, tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.jpg").write_bytes(next(images.glob("class_000/*.jpg")).read_bytes())
    os.symlink(tmp_path / "gone.jpg", root / "a" / "y.jpg")
    with pytest.raises(sluice.NotFoundError, match=r"cannot read image .*a/y.jpg"):
        list(sluice.image_folder(root))


def test_an_error_about_a_file_whose_name_is_not_utf8_names_it_escaped(tmp_path):
    name = os.fsencode(str(tmp_path)) + b"/bad\xe9.parquet"
    with open(name, "wb") as f:
        f.write(b"not parquet at all")
    with pytest.raises(sluice.SluiceError) as raised:
        list(sluice.parquet(str(tmp_path / "*.parquet")))
    assert "bad\\xe9.parquet" in str(raised.value)
    # Skipped, the same name raised UnicodeDecodeError from skip_summary.
    os.makedirs(os.fsencode(str(tmp_path)) + b"/imgs/cls")
    with open(os.fsencode(str(tmp_path)) + b"/imgs/cls/bad\xe9.jpg", "wb") as f:
        f.write(b"not an image")
    it = iter(sluice.image_folder(str(tmp_path / "imgs"), on_corrupt="skip"))
    assert list(it) == [] and it.skipped == 1 and "bad\\xe9.jpg" in it.skip_summary


def test_a_fifo_is_refused_naming_it_not_read_as_empty_or_waited_on(tmp_path):
    fifo = tmp_path / "records.tfrecord"
    os.mkfifo(fifo)
    done = []
    reader = threading.Thread(target=lambda: done.append(_error_of(lambda: list(sluice.tfrecord(str(fifo))))),
                              daemon=True)
    reader.start()
    reader.join(60)
    assert done, "reading a FIFO with no writer hung"
    assert isinstance(done[0], sluice.InvalidArgumentError)
    assert f"{fifo} is a pipe, socket or device, not a file" in str(done[0])


def _error_of(read):
    try:
        read()
    except Exception as e:  # noqa: BLE001 (returned to be checked)
        return e
    return None


def test_a_file_list_saved_with_a_bom_reads_its_first_path(images, tmp_path):
    listed = sorted(images.glob("class_*/*.jpg"))
    lines = [f"{p} {i}" for i, p in enumerate(listed)]
    (tmp_path / "list.txt").write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    assert ids(sluice.file_list(tmp_path / "list.txt", shuffle=False)) == list(range(len(listed)))


def test_a_path_starting_with_a_tilde_is_said_to_be_unexpanded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for path in ("~/records.tfrecord", "~/shards/*.tfrecord"):
        error = _error_of(lambda: list(sluice.tfrecord(path)))
        assert isinstance(error, sluice.NotFoundError), error
        assert path in str(error) and "'~' is not expanded" in str(error), error
    error = _error_of(lambda: list(sluice.tfrecord("data~/records.tfrecord")))
    assert "not expanded" not in str(error), error
