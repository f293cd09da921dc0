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

void BM_W2Warp(benchmark::State& state) {
  sluice::kernels::LimitSimdFromEnvironment();
  state.SetLabel(sluice::kernels::SimdTarget());
  const sluice::ImageDims dims{32, 32, 3};
  std::vector<uint8_t> src(32 * 32 * 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  std::vector<float> dst(src.size());
  sluice::kernels::WarpSpec spec{sluice::DType::kUInt8, dims, sluice::kernels::FillMode::kReflect, 0.f};
  spec.chw_out = spec.rescaled = true;
  spec.scale = 1 / 255.f;
  const double angle = static_cast<double>(state.range(0)) * M_PI / 180, zoom = 1.0;
  const double centred[6] = {std::cos(angle) / zoom, -std::sin(angle) / zoom, 0,
                             std::sin(angle) / zoom, std::cos(angle) / zoom,  0};
  const sluice::kernels::Affine map = sluice::kernels::FromCentred(centred, dims);
  for (auto _ : state) {
    sluice::kernels::WarpAffine(spec, map, src.data(), reinterpret_cast<uint8_t*>(dst.data()));
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_W2Warp)->Arg(0)->Arg(10)->Arg(20)->Arg(36);

}  // namespace

BENCHMARK_MAIN();
