#!/usr/bin/env bash
# Installs the Debian packages sluice builds, tests and benchmarks with.
# Idempotent and quick when everything is present.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ pkg-config ccache
  libprotobuf-dev protobuf-compiler libabsl-dev libhwy-dev
  libcli11-dev nlohmann-json3-dev libbenchmark-dev
  # CRC32C of TFRecords and of every batch on the wire (ISA-L's crc32_iscsi)
  libisal-dev
  # WebDataset tar shards (libarchive reads and checks the tar framing)
  libarchive-dev
  # the Python module (pybind11) hands batches to torch through DLPack
  pybind11-dev libdlpack-dev
  # image decoding: libjpeg-turbo (its libjpeg API crops and scales in the decoder), libpng, libwebp
  libjpeg62-turbo-dev libpng-dev libwebp-dev
  # the service: gRPC, TLS, wire compression
  libgrpc++-dev protobuf-compiler-grpc libssl-dev libzstd-dev liblz4-dev
  # Prometheus metrics of the dispatcher and workers (prometheus-cpp's pull exposer)
  prometheus-cpp-dev
  # tests: GoogleTest, and OpenCV as the independent reference for ops
  libgtest-dev libgmock-dev libopencv-core-dev libopencv-imgproc-dev
  # the torch peer of the benchmarks runs under Debian's python3
  python3-torch python3-torchvision python3-protobuf python3-numpy python3-venv python3-pil
  # the service bench's Python gRPC feed peer
  python3-grpcio
  # the container image's root filesystem without a container builder (scripts/container_rootfs.sh), the
  # manylinux wheel's Debian 11 roots (scripts/manylinux/), and the image built by a real builder
  debootstrap podman
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_deps: done"
