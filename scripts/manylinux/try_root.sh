#!/usr/bin/env bash
# A fresh Debian 11 root (glibc 2.31, minbase: none of the build's -dev
# packages) with the manylinux wheel installed in a fresh virtual
# environment /venv, beside the CPU torch wheel, pyarrow and auditwheel:
# where tests/python/test_manylinux.py runs sluice. Debian 11's Python is
# 3.9, so the root gets the build root's CPython 3.11 (/opt/python3.11) and the
# runtime libraries it needs. Wheels come from the host's pip.
#
#   scripts/manylinux/try_root.sh DIR WHEEL [BUILD_ROOT]   (default build/manylinux-root)
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 2 ]] || { echo "usage: $0 DIR WHEEL [BUILD_ROOT]" >&2; exit 2; }
dir=$(realpath -m "$1")
wheel=$(realpath "$2")
build_root=$(realpath -m "${3:-build/manylinux-root}")
[[ -x $build_root/opt/python3.11/bin/python3 ]] ||
  { echo "try_root: no CPython in $build_root (scripts/manylinux/build.sh builds it)" >&2; exit 1; }
source scripts/lib/debian_mirror.sh
source scripts/lib/manylinux_pip.sh
mirror=$(debian_mirror)
RUNTIME_PACKAGES=(ca-certificates libssl1.1 libffi7 libsqlite3-0 libbz2-1.0 liblzma5 zlib1g libuuid1 procps)

echo "try_root: Debian 11 (minbase) in $dir"
debootstrap --variant=minbase bullseye "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 ||
  { tail -20 "$dir.debootstrap.log" >&2; exit 1; }
chroot "$dir" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends ${RUNTIME_PACKAGES[*]}" >/dev/null
cp -a "$build_root/opt/python3.11" "$dir/opt/python3.11"
echo "try_root: wheels (host pip)"
mkdir -p "$dir/wheels"
cp "$wheel" "$dir/wheels/"
manylinux_download 3.11 "$dir/wheels" "$wheel" "torch==2.13.0" auditwheel
echo "try_root: /venv"
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$dir" sh -c \
  "/opt/python3.11/bin/python3 -m venv /venv && /venv/bin/pip install -q --no-index --find-links /wheels \
   /wheels/$(basename "$wheel") torch auditwheel"
echo "try_root: done; run: chroot $dir /venv/bin/sluice --version"
