#!/usr/bin/env bash
# Builds the image's root filesystem where no container builder runs: Debian
# 12 (debootstrap, minbase), then deploy/container/install.sh in it, the
# Containerfile's own step. The wheel's dependencies are downloaded by the
# host's pip into DIR/wheels, so the root filesystem needs no pip settings
# of its own. Needs root (debootstrap, chroot) and the host's Debian mirror
# (read from its apt sources).
#
#   scripts/container_rootfs.sh DIR WHEEL
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 2 ]] || { echo "usage: $0 DIR WHEEL" >&2; exit 2; }
dir=$1
wheel=$(realpath "$2")
[[ $(id -u) -eq 0 ]] || { echo "container_rootfs: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "container_rootfs: debootstrap is not installed" >&2; exit 1; }

source scripts/lib/debian_mirror.sh
mirror=$(debian_mirror)

echo "container_rootfs: Debian 12 (minbase) in $dir"
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 ||
  { tail -20 "$dir.debootstrap.log" >&2; exit 1; }
echo "container_rootfs: the wheel's dependencies, by this host's pip"
mkdir -p "$dir/wheels"
.venv/bin/python -m pip download -q -d "$dir/wheels" "$wheel"
cp deploy/container/install.sh "$dir/tmp/install.sh"
echo "container_rootfs: deploy/container/install.sh"
mount -t proc proc "$dir/proc"
trap 'umount "$dir/proc"' EXIT
# A clean environment, as a container build's: none of this host's pip or
# locale settings.
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  chroot "$dir" sh /tmp/install.sh "/wheels/$(basename "$wheel")" --no-index --find-links /wheels
rm -rf "$dir/tmp/install.sh" "$dir/wheels"
echo "container_rootfs: done; run as the image does: chroot --userspec=10001:10001 $dir sluice worker --help"
