#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer and UBSan on) in
# build-fuzz/ and runs each for SECONDS, PARALLEL at a time. Inputs that
# reach new code are merged into bench/fuzz/corpus/<target>/ (commit them:
# CI replays them); a crash, leak or sanitizer report stops that target and
# leaves the input in bench/fuzz/findings/.
#
# Usage: bench/fuzz/run.sh [SECONDS [TARGET...]]     (default: 60 s, every target)
# Env:   PARALLEL (default: the number of cores), CLANG (default: clang-16)
# Needs: apt-get install clang-16 libclang-rt-16-dev
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-60}
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(tfrecord_reader tfrecord_index example_parser idx_header image_header wire_batch journal)
fi
parallel=${PARALLEL:-$(nproc)}
clang=${CLANG:-clang-16}
clangxx=${clang/clang/clang++}
if ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "fuzz: $clang not found (apt-get install clang-16 libclang-rt-16-dev)" >&2
  exit 1
fi

flags="-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$clang" -DCMAKE_CXX_COMPILER="$clangxx" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DSLUICE_FUZZ=ON -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCHMARKS=OFF >/dev/null
ninja -C build-fuzz "${targets[@]/%/_fuzzer}"

mkdir -p bench/fuzz/findings
fuzz_one() {
  local target=$1 work
  work=$(mktemp -d "/tmp/sluice-fuzz-$target.XXXX")
  echo "fuzz: $target for ${seconds}s"
  local status=0
  # New inputs land in $work (the first corpus folder); the committed corpus
  # is read only, then merged into: only inputs that add coverage are kept.
  build-fuzz/bench/fuzz/${target}_fuzzer "$work" "bench/fuzz/corpus/$target" \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=65536 \
    -artifact_prefix="bench/fuzz/findings/$target-" -print_final_stats=1 \
    >"bench/fuzz/findings/$target.log" 2>&1 || status=$?
  build-fuzz/bench/fuzz/${target}_fuzzer -merge=1 "bench/fuzz/corpus/$target" "$work" \
    >>"bench/fuzz/findings/$target.log" 2>&1 || true
  rm -rf "$work"
  local runs
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "bench/fuzz/findings/$target.log" | grep -o '[0-9]*$' | tail -1)
  if [[ $status -ne 0 ]]; then
    echo "fuzz: $target FOUND A FAILURE after ${runs:-?} runs: see bench/fuzz/findings/$target.log" >&2
    return 1
  fi
  echo "fuzz: $target ok: ${runs:-?} runs, corpus $(ls "bench/fuzz/corpus/$target" | wc -l) inputs"
}

failed=0
running=0
for target in "${targets[@]}"; do
  fuzz_one "$target" &
  running=$((running + 1))
  if [[ $running -ge $parallel ]]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [[ $running -gt 0 ]]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit $failed
