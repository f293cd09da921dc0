#!/usr/bin/env bash
# Runs inside the build root (Debian 11, glibc 2.31): builds what Debian 11
# has too old or not at all from Debian 12's sources in /src, into $PREFIX
# (shared libraries, which auditwheel copies into the wheel), and each
# CPython of $PYTHONS into /opt/pythonX.Y (Debian 11's is 3.9; pyarrow and
# torch need 3.10+). Each part is skipped when it is already installed.
set -euo pipefail
PREFIX=${PREFIX:-/opt/sluice-deps}
PYTHONS=${PYTHONS:-3.11 3.13}
JOBS=${JOBS:-$(nproc)}
tools=/opt/python${PYTHONS%% *}
export PATH=$tools/bin:$PATH CMAKE_PREFIX_PATH=$PREFIX PIP_ROOT_USER_ACTION=ignore

step() { echo "manylinux deps: $*"; }

# python_build X.Y: CPython from /src/Python-X.Y.*, as upstream ships it.
python_build() {
  [[ -x /opt/python$1/bin/python3 ]] && return
  step "CPython $1"
  cd /src/Python-"$1".*/
  ./configure -q --prefix="/opt/python$1" --with-ensurepip=install >/dev/null
  make -s -j"$JOBS" >/dev/null 2>&1
  make -s install >/dev/null 2>&1
  make -s distclean >/dev/null 2>&1
}

# cmake_install NAME SOURCE_DIR [ARGS...]: a Release build of shared
# libraries into $PREFIX.
cmake_install() {
  local name=$1 src=$2
  shift 2
  [[ -e $PREFIX/.done-$name ]] && return
  step "$name"
  cmake -S "$src" -B "/build/$name" -G Ninja -Wno-dev -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF -DCMAKE_CXX_STANDARD=17 \
    -DCMAKE_INSTALL_RPATH='$ORIGIN' --no-warn-unused-cli "$@" >"/build/$name.log"
  cmake --build "/build/$name" -j"$JOBS" >>"/build/$name.log" || { tail -30 "/build/$name.log"; exit 1; }
  cmake --install "/build/$name" >>"/build/$name.log"
  touch "$PREFIX/.done-$name"
}

for version in $PYTHONS; do python_build "$version"; done
# The build tools, from the wheels the host downloaded into /wheels.
"$tools/bin/python3" -m pip install -q --no-index --find-links /wheels cmake ninja
mkdir -p /build "$PREFIX"
# Abseil in a namespace of its own (absl::lts_20220623_sluice): another copy
# in the process (torch, pyarrow, grpcio) can never bind to sluice's.
sed -i 's/^#define ABSL_OPTION_INLINE_NAMESPACE_NAME .*/#define ABSL_OPTION_INLINE_NAMESPACE_NAME lts_20220623_sluice/' \
  /src/abseil-*/absl/base/options.h
cmake_install abseil /src/abseil-* -DABSL_PROPAGATE_CXX_STD=ON
cmake_install protobuf /src/protobuf-* -Dprotobuf_BUILD_TESTS=OFF
cmake_install grpc /src/grpc-* -DgRPC_INSTALL=ON -DgRPC_BUILD_TESTS=OFF -DgRPC_ABSL_PROVIDER=package \
  -DgRPC_PROTOBUF_PROVIDER=package -DgRPC_SSL_PROVIDER=package -DgRPC_ZLIB_PROVIDER=package \
  -DgRPC_CARES_PROVIDER=package -DgRPC_RE2_PROVIDER=package -DgRPC_BUILD_CSHARP_EXT=OFF \
  -DgRPC_BUILD_GRPC_CSHARP_PLUGIN=OFF -DgRPC_BUILD_GRPC_NODE_PLUGIN=OFF -DgRPC_BUILD_GRPC_OBJECTIVE_C_PLUGIN=OFF \
  -DgRPC_BUILD_GRPC_PHP_PLUGIN=OFF -DgRPC_BUILD_GRPC_PYTHON_PLUGIN=OFF -DgRPC_BUILD_GRPC_RUBY_PLUGIN=OFF
cmake_install highway /src/highway-* -DHWY_ENABLE_TESTS=OFF -DHWY_ENABLE_EXAMPLES=OFF -DHWY_ENABLE_CONTRIB=OFF
cmake_install prometheus-cpp /src/prometheus-cpp-* -DENABLE_PUSH=OFF -DENABLE_TESTING=OFF -DUSE_THIRDPARTY_LIBRARIES=OFF
# libjpeg-turbo 2.1 (Debian 11 has 2.0), with its SIMD (nasm): W3 decodes
# as fast as with Debian 12's.
cmake_install libjpeg-turbo /src/libjpeg-turbo-* -DCMAKE_INSTALL_LIBDIR="$PREFIX/lib" -DENABLE_STATIC=OFF -DWITH_TURBOJPEG=OFF -DREQUIRE_SIMD=ON
# libarchive for tar shards only: without libxml2 (which pulls 30 MB of
# ICU), expat, crypto, ACLs or extended attributes; with its compressors.
cmake_install libarchive /src/libarchive-* -DENABLE_LIBXML2=OFF -DENABLE_EXPAT=OFF -DENABLE_OPENSSL=OFF \
  -DENABLE_NETTLE=OFF -DENABLE_LIBB2=OFF -DENABLE_PCREPOSIX=OFF -DENABLE_CNG=OFF -DENABLE_ACL=OFF -DENABLE_XATTR=OFF \
  -DENABLE_TAR=OFF -DENABLE_CPIO=OFF -DENABLE_CAT=OFF -DENABLE_TEST=OFF
cmake_install cli11 /src/cli11-* -DCLI11_BUILD_TESTS=OFF -DCLI11_BUILD_EXAMPLES=OFF -DCLI11_BUILD_DOCS=OFF
cmake_install nlohmann-json /src/nlohmann-json3-* -DJSON_BuildTests=OFF
step "done: $PREFIX"
