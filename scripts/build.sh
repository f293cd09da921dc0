#!/usr/bin/env bash
# Configures and builds sluice (Release) into build/: libsluice, the
# `sluice` command, the Python module, the tests, the bench tool
# (sluice-bench) and the micro-benchmarks.
# SLUICE_CMAKE_ARGS adds options (e.g. -DSLUICE_WITH_CUDA=ON).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure_pyarrow.sh

generator=()
[[ ! -f build/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# shellcheck disable=SC2086
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_PYTHON=ON ${SLUICE_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$(nproc)"
echo "build: $(pwd)/build/src/sluice/cli/sluice (bench tool: $(pwd)/build/bench/tool/sluice-bench)"
