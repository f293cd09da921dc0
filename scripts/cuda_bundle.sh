#!/usr/bin/env bash
# Builds sluice with the cuda backend (build-cuda/) and gathers a
# self-contained folder to run it on a GPU host that has the CUDA driver but
# none of the build's libraries (gRPC, protobuf, abseil, libjpeg-turbo...):
#   OUT/bin/sluice and sluice-bench, OUT/tests/ (the cuda test binaries),
#   OUT/lib/ (libsluice and every shared library they load beyond the C
#   runtime and the CUDA driver),
#   OUT/python/sluice/ (given a Python's include directory: the package with
#   its module built for that Python).
# Usage: scripts/cuda_bundle.sh OUT [PYTHON_INCLUDE_DIR [EXT_SUFFIX]]
#   SLUICE_CUDA_ARCH (default 90): the GPU architectures to compile for.
# On the GPU host: LD_LIBRARY_PATH=OUT/lib PYTHONPATH=OUT/python.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/cuda_bundle.sh OUT [PYTHON_INCLUDE_DIR [EXT_SUFFIX]]}
py_include=${2:-}
ext_suffix=${3:-.cpython-312-x86_64-linux-gnu.so}
build=build-cuda

# nvJPEG, for the decode ops' cuda kernels: NVIDIA's wheel (CUDA 13), when
# the toolkit has none; configure finds it in .venv.
if ! compgen -G "/usr/local/cuda*/include/nvjpeg.h" >/dev/null &&
   ! compgen -G ".venv/lib/python3*/site-packages/nvidia/cu*/include/nvjpeg.h" >/dev/null; then
  .venv/bin/python -m pip install -q nvidia-nvjpeg==13.2.3.58
fi
if [[ ! -f $build/build.ninja ]]; then
  cmake -S . -B $build -G Ninja -DSLUICE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${SLUICE_CUDA_ARCH:-90}" \
    -DSLUICE_BUILD_BENCHMARKS=ON -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
fi
cuda_tests=$(cd $build && ninja -t targets all | grep -oE '^tests/(ops_cuda_[a-z_]*|profile_gpu_tail)_test' | sort -u)
ninja -C $build sluice sluice_cli sluice_bench $cuda_tests

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/tests"
cp $build/src/sluice/cli/sluice $build/bench/tool/sluice-bench "$out/bin/"
for t in $cuda_tests; do cp "$build/$t" "$out/tests/"; done
cp -L $build/src/sluice/libsluice.so.0.1 "$out/lib/"

if [[ -n $py_include ]]; then
  mkdir -p "$out/python"
  cp -r python/sluice "$out/python/"
  pybind11_include=$(.venv/bin/python -m pybind11 --includes | tr ' ' '\n' | grep pybind11 | sed 's/^-I//')
  # The module links libsluice and the abseil pieces its bindings call.
  g++ -O2 -std=gnu++17 -shared -fPIC -fvisibility=hidden -DSLUICE_WITH_CUDA=1 \
    -Iinclude -Isrc -I$build/include -I$build/proto -I"$py_include" -I"$py_include/.." -I"$pybind11_include" \
    python/src/*.cc -o "$out/python/sluice/_sluice$ext_suffix" \
    -L$build/src/sluice -l:libsluice.so.0.1 -Wl,--as-needed /usr/lib/x86_64-linux-gnu/libabsl_*.so \
    /usr/lib/x86_64-linux-gnu/libprotobuf.so -Wl,-rpath,'$ORIGIN/../../lib'
  mkdir -p "$out/python/sluice/bin"
  cp $build/src/sluice/cli/sluice "$out/python/sluice/bin/"
fi

# Every library the binaries load, except the C runtime's and the driver's.
for f in "$out"/bin/* "$out"/tests/* "$out"/lib/*; do
  ldd "$f" | awk '/=> \//{print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcuda)\.so' |
  while read -r lib; do cp -Ln "$lib" "$out/lib/" 2>/dev/null || true; done
# Symbols stay behind: the folder travels.
find "$out" -type f \( -name '*.so*' -o -perm -u+x \) -exec strip --strip-unneeded {} + 2>/dev/null || true
echo "cuda_bundle: $(du -sh "$out" | cut -f1) in $out"
