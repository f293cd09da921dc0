#!/usr/bin/env bash
# Every test: install what is missing, build, make .venv with the package,
# run the GoogleTest suites and the install, layering and style checks
# (ctest), the Python package's tests (pytest, in .venv), then the TensorFlow interop tests in the peer virtual
# environment (they report themselves skipped where tensorflow-cpu cannot be
# installed).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh
scripts/build.sh
echo "== Python package (pip install . into .venv; also the style check's tools)"
scripts/python_env.sh

echo "== GoogleTest suites, the layering and style checks"
(cd build && ctest -j "$(nproc)" --output-on-failure)

echo "== Python package's tests"
# The plugins ctest built: the example against the installed package, and
# the misbehaving ones of the plugin loader's tests.
export SLUICE_EXAMPLE_PLUGIN="$(pwd)/build/examples/plugin_op/libsluice_cutout.so"
export SLUICE_TEST_PLUGINS="$(pwd)/build/tests/plugins"
PATH="$(pwd)/.venv/bin:$PATH" .venv/bin/python -m pytest -q tests/python

echo "== TensorFlow interop"
export SLUICE_BIN="$(pwd)/build/src/sluice/cli/sluice"
if PY=$(bench/peers/ensure_peer_venv.sh); then
  "$PY" -m pytest -q tests/integration
else
  echo "tensorflow-cpu could not be installed: TF interop tests skipped"
fi
