"""sluice.from_generator (an iterable's items in order, one split of unknown
length) and image columns of a Python dataset (decoded uint8 images of any
size, read by the image ops as raw netpbm pixels)."""

import numpy as np
import pytest

import sluice
from sluice import ops

import user_code


def _ids(pipe, key="i", **kwargs):
    return [int(v) for batch in pipe.iterate(**kwargs) for v in batch[key]]


def test_a_generator_function_gives_its_items_in_order_every_epoch():
    pipe = sluice.from_generator(user_code.numbers).batch(64)
    for epoch in (0, 1):
        seen = []
        for batch in pipe.iterate(epoch=epoch):
            assert batch["x"].dtype == np.int64 and batch["x"].shape[1:] == (3,)
            assert (batch["x"] == batch["i"][:, None]).all()
            seen += [int(i) for i in batch["i"]]
        assert seen == list(range(250))
    with pytest.raises(TypeError, match="a generator"):
        len(pipe)


def test_an_iterable_and_an_import_path_work_as_a_function_does():
    rows = [(float(r["0"]), int(r["1"])) for r in sluice.from_generator(user_code.Stream(130))]
    assert rows == [(i / 2, i) for i in range(130)]
    assert _ids(sluice.from_generator("user_code:numbers").batch(100)) == list(range(250))


def test_an_iterator_or_an_empty_generator_is_refused_saying_why():
    with pytest.raises(TypeError, match="an iterator runs once.*from_generator\\(make\\), not"):
        sluice.from_generator(user_code.numbers())
    with pytest.raises(ValueError, match="made no items"):
        sluice.from_generator(user_code.Stream(0))


def test_an_item_that_is_none_is_named_as_such():
    def nothing():
        for _ in range(3):
            yield None

    with pytest.raises(TypeError, match="'0' is None: each item's values are arrays, numbers or bytes"):
        sluice.from_generator(nothing)


def test_an_exception_names_the_item_with_the_traceback():
    with pytest.raises(sluice.SluiceError,
                       match="(?s)python generator 'fails_at_37' failed making item 37:.*"
                             "RuntimeError: the stream broke at 37"):
        list(sluice.from_generator(user_code.fails_at_37).batch(10))


def test_the_service_runs_it_whole_on_each_worker_and_refuses_to_split_it():
    pipe = sluice.from_generator(user_code.numbers)
    assert sorted(_ids(pipe.distribute(local_workers=1, mode="parallel_epochs").batch(50))) == list(range(250))
    with pytest.raises(sluice.SluiceError, match="one split, not splittable among workers.*parallel_epochs"):
        list(pipe.distribute(local_workers=1).batch(50))


def test_a_checkpoint_resumes_where_it_was():
    it = sluice.from_generator(user_code.numbers).batch(40).iterate()
    first = [int(i) for _ in range(3) for i in next(it)["i"]]
    rest = _ids(sluice.from_generator(user_code.numbers).batch(40), state=it.state())
    assert first + rest == list(range(250))


def test_images_of_any_size_reach_the_image_ops():
    pipe = (sluice.from_dataset(user_code.Photos(), names=("image", "label"), images=("image",), processes=2)
            .map(ops.decode_image(size=[20, 24])).batch(12))
    seen = []
    for batch in pipe:
        assert batch["image"].shape[1:] == (20, 24, 3)
        # Each image is filled with its index, so any resize keeps it; gray
        # ones come as RGB.
        assert (batch["image"] == batch["label"][:, None, None, None].astype(np.uint8)).all()
        seen += [int(i) for i in batch["label"]]
    assert sorted(seen) == list(range(60))


def test_image_pixels_arrive_exactly_and_non_images_are_refused():
    pipe = (sluice.from_dataset(user_code.Gradients(), images=("image",), processes=1, shuffle=False)
            .map(ops.decode_image(size=[24, 32])).batch(16))
    batch = next(iter(pipe))
    assert (batch["image"] == np.stack([user_code.gradient(i) for i in range(16)])).all()
    with pytest.raises(TypeError, match="'label' is int64\\[\\]: an image column holds uint8 arrays"):
        sluice.from_dataset(user_code.Gradients(), images=("label",))
    with pytest.raises(ValueError, match="images names no column \\['img'\\]"):
        sluice.from_dataset(user_code.Gradients(), images=("img",))


def test_bytes_of_any_length_come_whole_up_to_the_end():
    rows = [(int(r["i"]), bytes(r["blob"])) for r in sluice.from_generator(user_code.blob_stream)]
    assert rows == [(i, user_code.blob(i)) for i in range(90)]
