"""C++ op plugins from Python: sluice.load_plugin adds a plugin's ops to
sluice.ops, and they run in pipelines like built-in ones. The example plugin
(examples/plugin_op) is built against the installed package by ctest's
InstalledPackage fixture; scripts/test.sh points SLUICE_EXAMPLE_PLUGIN and
SLUICE_TEST_PLUGINS at what it built."""

import os

import numpy as np
import pytest

import sluice
from sluice import ops


def _env(name):
    path = os.environ.get(name)
    if not path:
        pytest.fail(f"{name} is not set: run the tests with scripts/test.sh (ctest builds the plugins)")
    return path


def test_a_loaded_plugins_op_runs_like_a_builtin():
    assert not hasattr(ops, "random_cutout")
    sluice.load_plugin(_env("SLUICE_EXAMPLE_PLUGIN"))
    sluice.load_plugin(_env("SLUICE_EXAMPLE_PLUGIN"))  # again: a no-op
    assert "random_cutout" in ops.__all__
    assert "Runs on: cpu." in ops.random_cutout.__doc__
    assert "libsluice_cutout.so" in ops.random_cutout.__doc__
    images = np.full((32, 8, 8, 3), 100, np.uint8)
    pipe = (sluice.arrays({"image": images, "label": np.arange(32)})
            .map(ops.random_cutout(size=[2, 3], value=9))
            .batch(32)
            .with_options(seed=3))
    out = next(iter(pipe))["image"]
    assert set(np.unique(out)) == {9, 100}
    patched = (out == 9).reshape(32, -1).sum(axis=1)
    assert (patched > 0).all() and (patched <= 2 * 3 * 3).all()
    np.testing.assert_array_equal(next(iter(pipe.with_options(threads=1)))["image"], out)


def test_bad_plugins_raise_errors_naming_the_file():
    with pytest.raises(sluice.NotFoundError, match="plugin /no/such.so: no such file"):
        sluice.load_plugin("/no/such.so")
    wrong = os.path.join(_env("SLUICE_TEST_PLUGINS"), "libtest_plugin_wrong_abi.so")
    with pytest.raises(sluice.InvalidArgumentError, match="libtest_plugin_wrong_abi.so: was built for another sluice"):
        sluice.load_plugin(wrong)
