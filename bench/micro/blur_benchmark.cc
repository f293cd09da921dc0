// gaussian_blur per image through its registered CPU kernel: W1's (28x28
// float, sigma drawn from [0.1, 2] per sample, 11x11) and W2's (32x32x3
// uint8, sigma 0.8, 11x11). Items are images.
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "benchmark/benchmark.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sluice/ops/op_registry.h"

namespace {

using sluice::DType;
using sluice::ops::Backend;

// Each run blurs a tile of images that stays in cache (the map's scratch)
// into the next tile of a batch larger than the caches, as W1's 8192
// images (25 MiB) are.
constexpr int64_t kTile = 256, kBatch = 8192;

template <typename T>
void RunBlur(benchmark::State& state, const std::vector<int64_t>& shape, const std::string& attrs_json,
             bool bypass_cache = false) {
  google::protobuf::Struct attrs;
  if (!google::protobuf::util::JsonStringToMessage(attrs_json, &attrs).ok()) return state.SkipWithError("attrs");
  const DType dtype = std::is_same_v<T, float> ? DType::kFloat32 : DType::kUInt8;
  const sluice::ColumnSpec spec{"image", dtype, sluice::Shape(shape)};
  auto& registry = sluice::ops::OpRegistry::Global();
  auto inferred = registry.Infer("gaussian_blur", attrs, sluice::Schema({spec}));
  if (!inferred.ok()) return state.SkipWithError(inferred.status().ToString().c_str());
  auto kernel = registry.MakeKernel("gaussian_blur", Backend::kCpu, *inferred);
  if (!kernel.ok() || !(*kernel)->Setup(sluice::ops::SetupContext{}).ok()) return state.SkipWithError("kernel");
  const int64_t n = spec.shape.num_elements();
  std::vector<T> src(n * kTile), dst(n * kBatch);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<T>((i * 2654435761u) >> 24);
  const sluice::ops::ColumnRef in{reinterpret_cast<uint8_t*>(src.data()), n * static_cast<int64_t>(sizeof(T))};
  sluice::ops::KernelContext ctx;
  ctx.rows = kTile;
  ctx.op_key = 42;
  ctx.bypass_cache = bypass_cache;
  int64_t tile = 0;
  for (auto _ : state) {
    ++ctx.epoch;  // fresh sigmas
    tile = (tile + 1) % (kBatch / kTile);
    const sluice::ops::ColumnRef out{reinterpret_cast<uint8_t*>(dst.data() + tile * kTile * n),
                                     n * static_cast<int64_t>(sizeof(T))};
    if (!(*kernel)->Run(ctx, {in}, {out}).ok()) return state.SkipWithError("run");
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations() * kTile);
}

void BM_W1Blur(benchmark::State& state) { RunBlur<float>(state, {28, 28}, R"({"ksize": 11, "sigma": [0.1, 2.0]})"); }
void BM_W1BlurPastCaches(benchmark::State& state) {
  RunBlur<float>(state, {28, 28}, R"({"ksize": 11, "sigma": [0.1, 2.0]})", true);
}
void BM_W1BlurFixedSigma(benchmark::State& state) { RunBlur<float>(state, {28, 28}, R"({"ksize": 11, "sigma": 2.0})"); }
void BM_W2Blur(benchmark::State& state) { RunBlur<uint8_t>(state, {32, 32, 3}, R"({"ksize": 11, "sigma": 0.8})"); }
BENCHMARK(BM_W1Blur);
BENCHMARK(BM_W1BlurPastCaches);
BENCHMARK(BM_W1BlurFixedSigma);
BENCHMARK(BM_W2Blur);

}  // namespace

BENCHMARK_MAIN();
