#!/usr/bin/env bash
# Packages this checkout's build (scripts/build.sh) as a wheel in dist/:
# the _sluice module, libsluice and the `sluice` command, found by relative
# RPATHs, with pyarrow's Arrow libraries found beside it in site-packages.
# It links Debian 12's shared libraries (gRPC, protobuf, abseil, ...): it
# installs where those are, as in the image (deploy/container/).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/src/sluice/cli/sluice && -x .venv/bin/python ]] || { scripts/build.sh && scripts/python_env.sh; }
mkdir -p dist
rm -f dist/sluice-*.whl
SKBUILD_CMAKE_DEFINE="SLUICE_PREBUILT_DIR=$(pwd)/build" \
  .venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w dist .
ls dist/sluice-*.whl
