// W2's fused warp (uint8 32x32x3 in, rescaled float planes out, reflect
// borders) per image, by rotation: a rotation's corners sample outside the
// image, and those vectors take the warp's border path. SLUICE_SIMD caps
// the SIMD target, as for `sluice run`.
#include <cmath>
#include <vector>

#include "benchmark/benchmark.h"
#include "sluice/kernels/simd.h"
#include "sluice/kernels/warp.h"

namespace {

// W2's warp spec and a rotation by `degrees` (zoom 1).
struct W2Warp {
  sluice::kernels::WarpSpec spec{sluice::DType::kUInt8, {32, 32, 3}, sluice::kernels::FillMode::kReflect, 0.f};
  sluice::kernels::Affine map;

  explicit W2Warp(int64_t degrees) {
    spec.chw_out = spec.rescaled = true;
    spec.scale = 1 / 255.f;
    const double angle = static_cast<double>(degrees) * M_PI / 180;
    const double centred[6] = {std::cos(angle), -std::sin(angle), 0, std::sin(angle), std::cos(angle), 0};
    map = sluice::kernels::FromCentred(centred, spec.dims);
  }
};

std::vector<uint8_t> RandomBytes(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  return bytes;
}

// One image, in L1.
void BM_W2Warp(benchmark::State& state) {
  sluice::kernels::LimitSimdFromEnvironment();
  state.SetLabel(sluice::kernels::SimdTarget());
  const W2Warp warp(state.range(0));
  const std::vector<uint8_t> src = RandomBytes(32 * 32 * 3);
  std::vector<float> dst(src.size());
  for (auto _ : state) {
    sluice::kernels::WarpAffine(warp.spec, warp.map, src.data(), reinterpret_cast<uint8_t*>(dst.data()));
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// Image after image of a batch of W2's 1024 (3 MiB in, 12 MiB out, streamed
// where the warp streams its own stores): what the warp costs where its
// input and output are not in L1 or L2.
void BM_W2WarpBatch(benchmark::State& state) {
  sluice::kernels::LimitSimdFromEnvironment();
  state.SetLabel(sluice::kernels::SimdTarget());
  W2Warp warp(state.range(0));
  warp.spec.stream = sluice::kernels::WarpBypassFor(warp.spec) == sluice::kernels::WarpBypass::kItself;
  constexpr size_t kImage = 32 * 32 * 3, kBatch = 1024;
  const std::vector<uint8_t> src = RandomBytes(kImage * kBatch);
  std::vector<float> dst(src.size());
  for (auto _ : state) {
    for (size_t i = 0; i < kBatch; ++i) {
      sluice::kernels::WarpAffine(warp.spec, warp.map, src.data() + i * kImage,
                                  reinterpret_cast<uint8_t*>(dst.data() + i * kImage));
    }
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_W2Warp)->Arg(0)->Arg(10)->Arg(20)->Arg(36);
BENCHMARK(BM_W2WarpBatch)->Arg(0)->Arg(20);

}  // namespace

BENCHMARK_MAIN();
