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

}  // namespace

BENCHMARK_MAIN();
