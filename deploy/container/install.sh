#!/bin/sh
# Installs sluice from its wheel on Debian 12, the image's base: Python,
# the wheel and its dependencies in the virtual environment /opt/sluice,
# and the user `sluice` (uid 10001) the image runs as. A manylinux wheel
# (scripts/manylinux/build.sh) carries its libraries; a wheel of a Debian 12
# build (scripts/build_wheel.sh) needs Debian's gRPC, protobuf, abseil, ...,
# installed here too. Run as root by the Containerfile, and by
# scripts/container_rootfs.sh, which builds the same root filesystem
# without a container builder.
#
#   install.sh WHEEL [PIP_OPTIONS...]    e.g. --no-index --find-links /wheels
set -eu
wheel="$1"
shift
case "$(basename "$wheel")" in
  *manylinux*) libraries="" ;;
  *) libraries="libgrpc++1.51 libprotobuf32 libabsl20220623 libhwy1 libjpeg62-turbo libpng16-16 libwebp7 libisal2
       libarchive13 libprometheus-cpp-pull1.0 libzstd1 liblz4-1 libssl3" ;;
esac
apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  python3 python3-venv ca-certificates $libraries >/dev/null
rm -rf /var/lib/apt/lists/*
python3 -m venv /opt/sluice
/opt/sluice/bin/pip install --no-cache-dir --disable-pip-version-check -q "$@" "$wheel"
ln -sf /opt/sluice/bin/sluice /usr/local/bin/sluice
id sluice >/dev/null 2>&1 || useradd --uid 10001 --create-home --shell /usr/sbin/nologin sluice
