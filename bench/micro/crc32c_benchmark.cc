// CRC32C throughput on a batch-sized buffer: the service checks every batch
// it sends and receives, TFRecord readers every record.
#include <vector>

#include "benchmark/benchmark.h"
#include "sluice/io/crc32c.h"

namespace {

void BM_Crc32c(benchmark::State& state) {
  std::vector<uint8_t> data(static_cast<size_t>(state.range(0)));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131);
  for (auto _ : state) benchmark::DoNotOptimize(sluice::io::Crc32c(data.data(), data.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32c)->Arg(3072)->Arg(64 << 10)->Arg(1 << 20)->Arg(32 << 20);

// The client's receive: pieces of `range(0)` bytes as gRPC hands them over
// (just written by the kernel's socket copy, so in cache) copied with their
// CRC into a 1 MiB batch, one batch after another into the same buffer.
void BM_CopyAndCrc32c(benchmark::State& state) {
  const size_t piece = static_cast<size_t>(state.range(0));
  constexpr size_t kBatch = 1 << 20;
  std::vector<uint8_t> src(piece), dst(kBatch);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131);
  for (auto _ : state) {
    uint32_t crc = 0;
    for (size_t at = 0; at + piece <= kBatch; at += piece) {
      crc = sluice::io::CopyAndCrc32c(crc, dst.data() + at, src.data(), piece);
    }
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBatch / piece * piece));
}
BENCHMARK(BM_CopyAndCrc32c)->Arg(8 << 10)->Arg(16 << 10)->Arg(64 << 10);

}  // namespace

BENCHMARK_MAIN();
