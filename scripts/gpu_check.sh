#!/usr/bin/env bash
# On a GPU host, with a folder made by scripts/cuda_bundle.sh: runs every
# cuda test of the bundle, then the GPU benchmarks, each into its own log
# under OUT (run from the repository's root: the tests and benches read
# tests/ and bench/peers/). Needs the CUDA driver, and for the benches
# torch and torchvision with CUDA.
# BUNDLE is the folder, or a .tar.xz of it, unpacked into /tmp first (the
# folder is ~160 MB, its archive ~40 MB: what a 64 MiB transfer takes):
#   here:  scripts/cuda_bundle.sh /tmp/bundle PY312_INCLUDE_DIR
#          mkdir -p build-carry && tar -cf - -C /tmp bundle | xz -T2 > build-carry/bundle.tar.xz
#   there: scripts/gpu_check.sh build-carry/bundle.tar.xz OUT
# Usage: scripts/gpu_check.sh BUNDLE OUT [tests|bench|all (default)]
set -uo pipefail
bundle=${1:?usage: scripts/gpu_check.sh BUNDLE OUT [tests|bench|all]}
if [[ $bundle == *.tar.xz ]]; then
  # Python's tarfile: the host may have no xz command.
  top=$(python3 -c "import sys, tarfile
t = tarfile.open(sys.argv[1]); t.extractall('/tmp'); print(t.getnames()[0].split('/')[0])" "$bundle") || exit 1
  bundle=/tmp/$top
fi
bundle=$(realpath "$bundle")
out=$(realpath -m "${2:?usage: scripts/gpu_check.sh BUNDLE OUT [tests|bench|all]}")
what=${3:-all}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONPATH="$bundle/python"
export SLUICE_SOURCE_DIR=$PWD SLUICE_BIN="$bundle/bin/sluice" SLUICE_BINARY="$bundle/bin/sluice" \
  SLUICE_BENCH_DIR="$PWD/bench/peers" PATH="$bundle/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/device.txt" 2>&1
failed=0
if [[ $what != bench ]]; then
  for t in "$bundle"/tests/*; do
    name=$(basename "$t")
    # A hang must not spend the lease: each step has a time limit.
    if timeout 180 "$t" > "$out/$name.log" 2>&1; then status=passed; else status=FAILED; failed=1; fi
    ok=$(grep -c '^\[       OK \]' "$out/$name.log") skipped=$(grep -c '^\[  SKIPPED \]' "$out/$name.log")
    echo "$name: $status ($ok ok, $skipped skipped lines)"
  done
  if python3 -c "import pytest, torch" 2>/dev/null; then
    if timeout 240 python3 -m pytest -q tests/python/test_torch_cuda.py > "$out/test_torch_cuda.log" 2>&1; then
      status=passed
    else
      status=FAILED failed=1
    fi
    echo "test_torch_cuda.py: $status ($(tail -1 "$out/test_torch_cuda.log"))"
  fi
fi
if [[ $what != tests ]]; then
  # One Python for the peers: the host's, which has torch with CUDA.
  timeout 480 "$bundle/bin/sluice-bench" w3 --device cuda --runs 3 --json --data "$out/data" \
    > "$out/bench_w3_cuda.log" 2>&1
  echo "sluice-bench w3 --device cuda: rc=$?; $(tail -c 600 "$out/bench_w3_cuda.log")"
fi
exit $failed
