// Antialiased bilinear resampling (PIL's filter, which torchvision uses) of
// the crops W3 makes, against OpenCV's INTER_AREA and INTER_LINEAR on the
// same sizes for scale: OpenCV has no PIL-equivalent filter (INTER_LINEAR
// does not antialias, INTER_AREA is a box), so sluice carries its own.
#include <opencv2/imgproc.hpp>
#include <vector>

#include "benchmark/benchmark.h"
#include "sluice/kernels/resample.h"

namespace {

// A crop of (w x h) from a 500x375 decoded image, to 224x224.
std::vector<uint8_t> Source(int w, int h) {
  std::vector<uint8_t> src(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  return src;
}

void BM_SluiceResample(benchmark::State& state) {
  const int w = static_cast<int>(state.range(0)), h = static_cast<int>(state.range(1));
  std::vector<uint8_t> src = Source(w, h), dst(224 * 224 * 3);
  const sluice::kernels::Window window{0.5, 0.5, w - 1.0, h - 1.0};
  for (auto _ : state) {
    sluice::kernels::ResampleBilinear(src.data(), w, h, 3, int64_t{w} * 3, window, dst.data(), 224, 224);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_OpenCv(benchmark::State& state, int interpolation) {
  const int w = static_cast<int>(state.range(0)), h = static_cast<int>(state.range(1));
  std::vector<uint8_t> src = Source(w, h);
  cv::Mat in(h, w, CV_8UC3, src.data()), out(224, 224, CV_8UC3);
  cv::setNumThreads(1);
  for (auto _ : state) {
    cv::resize(in, out, cv::Size(224, 224), 0, 0, interpolation);
    benchmark::DoNotOptimize(out.data);
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_OpenCvArea(benchmark::State& state) { BM_OpenCv(state, cv::INTER_AREA); }
void BM_OpenCvLinear(benchmark::State& state) { BM_OpenCv(state, cv::INTER_LINEAR); }

// A typical W3 crop (half the image), a small one (upscaled) and a whole
// image shrunk 2x in the DCT first.
#define SIZES ->Args({340, 280})->Args({120, 100})->Args({250, 188})
BENCHMARK(BM_SluiceResample) SIZES;
BENCHMARK(BM_OpenCvArea) SIZES;
BENCHMARK(BM_OpenCvLinear) SIZES;

}  // namespace

BENCHMARK_MAIN();
