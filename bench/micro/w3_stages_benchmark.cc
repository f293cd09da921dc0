// Where one W3 image's time goes, on one core, stage by stage: full-image
// decoding (the bench's limit), decoding only the random-resized-crop
// window, then resampling it to 224x224, then normalizing into float32 CHW
// (the fused kernel W3 runs). The files are read into memory first, so no
// stage pays for I/O.
//
//   w3_stages_benchmark [--data DIR] [benchmark flags]   (DIR: data/imagenet)
//
// Each run decodes every image of the set once.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "sluice/core/rng.h"
#include "sluice/io/image_files.h"
#include "sluice/kernels/image_decoder.h"
#include "sluice/kernels/resample.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/normalize_params.h"

namespace {

using sluice::kernels::DecodedRegion;
using sluice::kernels::ImageInfo;
using sluice::kernels::Window;

constexpr int kOut = 224;

std::string& DataDir() {
  static std::string dir = "data/imagenet";
  return dir;
}

const absl::StatusOr<std::vector<std::string>>& Images() {
  static const absl::StatusOr<std::vector<std::string>> images = sluice::io::ReadImageFolder(DataDir());
  return images;
}

// One image's crop window as W3 draws it, and its DCT scale.
struct Crop {
  ImageInfo info;
  Window window;
  int denom = 1;
};

Crop CropOf(const std::string& bytes, int64_t index) {
  Crop c;
  c.info = *sluice::kernels::ReadImageInfo(bytes);
  sluice::SampleRng rng(1, 2, 0, static_cast<uint64_t>(index));
  c.window = sluice::ops::RandomResizedCropWindow(c.info.width, c.info.height, rng, 0.08, 1.0, 3.0 / 4, 4.0 / 3);
  c.denom = sluice::kernels::DctScaleFor(c.info, c.window, kOut, kOut);
  return c;
}

// Runs `stage` on image after image, reporting images/s.
template <typename Stage>
void Loop(benchmark::State& state, Stage stage) {
  if (!Images().ok()) {
    const std::string why = std::string(Images().status().message()) +
                            " (run `sluice make-data imagenet --out data/imagenet`, or pass --data DIR)";
    state.SkipWithError(why.c_str());
    return;
  }
  const std::vector<std::string>& images = *Images();
  DecodedRegion region;
  int64_t i = 0;
  for (auto _ : state) {
    const std::string& bytes = images[static_cast<size_t>(i) % images.size()];
    stage(bytes, i++, &region);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_FullDecode(benchmark::State& state) {
  Loop(state, [](const std::string& bytes, int64_t, DecodedRegion* region) {
    const ImageInfo info = *sluice::kernels::ReadImageInfo(bytes);
    benchmark::DoNotOptimize(sluice::kernels::DecodeRegion(bytes, info, sluice::kernels::WholeImage(info), 1,
                                                           info.width, info.height, region)
                                 .ok());
  });
}

void BM_CropDecode(benchmark::State& state) {
  Loop(state, [](const std::string& bytes, int64_t i, DecodedRegion* region) {
    const Crop c = CropOf(bytes, i);
    benchmark::DoNotOptimize(sluice::kernels::DecodeRegion(bytes, c.info, c.window, c.denom, kOut, kOut, region).ok());
  });
}

void BM_CropDecodeResample(benchmark::State& state) {
  std::vector<uint8_t> out(kOut * kOut * 3);
  Loop(state, [&](const std::string& bytes, int64_t i, DecodedRegion* region) {
    const Crop c = CropOf(bytes, i);
    (void)sluice::kernels::DecodeRegion(bytes, c.info, c.window, c.denom, kOut, kOut, region);
    sluice::kernels::ResampleBilinear(region->pixels.data(), region->width, region->height, 3,
                                      int64_t{region->width} * 3, region->window, out.data(), kOut, kOut);
    benchmark::DoNotOptimize(out.data());
  });
}

// W3's fused kernel: resampled rows straight into normalized float32 CHW,
// into a batch-sized buffer so that the stores go to memory as in W3.
void BM_CropDecodeResampleNormalize(benchmark::State& state) {
  const sluice::ops::Normalizer normalize(kOut, kOut, 3, sluice::DType::kFloat32, true, 0.5f,
                                          {1 / (0.229f * 255), 1 / (0.224f * 255), 1 / (0.225f * 255)},
                                          {-0.485f / 0.229f, -0.456f / 0.224f, -0.406f / 0.225f});
  const int kBatch = std::getenv("W3_BATCH") ? std::atoi(std::getenv("W3_BATCH")) : 256;
  const size_t image_bytes = size_t{kOut} * kOut * 3 * sizeof(float);
  // Aligned as sluice's buffer pool aligns batches.
  std::unique_ptr<uint8_t, decltype(&std::free)> batch(
      static_cast<uint8_t*>(std::aligned_alloc(64, image_bytes * kBatch)), &std::free);
  std::memset(batch.get(), 0, image_bytes * kBatch);
  Loop(state, [&](const std::string& bytes, int64_t i, DecodedRegion* region) {
    const Crop c = CropOf(bytes, i);
    (void)sluice::kernels::DecodeRegion(bytes, c.info, c.window, c.denom, kOut, kOut, region);
    uint8_t* dst = batch.get() + image_bytes * static_cast<size_t>(i % kBatch);
    sluice::kernels::ResampleBilinearPlanes(region->pixels.data(), region->width, region->height, 3,
                                            int64_t{region->width} * 3, region->window, kOut, kOut,
                                            [&](int y, const int16_t* levels, int64_t channel_stride) {
                                              normalize.Planes(levels, channel_stride, y, i % 2, dst);
                                            });
    benchmark::DoNotOptimize(dst);
  });
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--data") == 0) {
      DataDir() = argv[i + 1];
      for (int j = i; j + 2 <= argc; ++j) argv[j] = argv[j + 2];
      argc -= 2;
      break;
    }
  }
  benchmark::Initialize(&argc, argv);
  // Every run covers the whole set once: the images differ in cost (sizes,
  // progressive ones, PNGs), so a run over a prefix would not be W3's mix.
  const int64_t n = Images().ok() ? static_cast<int64_t>(Images()->size()) : 1;
  for (auto [name, fn] : {std::pair{"full_decode", BM_FullDecode}, std::pair{"crop_decode", BM_CropDecode},
                          std::pair{"crop_decode+resample", BM_CropDecodeResample},
                          std::pair{"crop_decode+resample+normalize", BM_CropDecodeResampleNormalize}}) {
    benchmark::RegisterBenchmark(name, fn)->Iterations(n)->Unit(benchmark::kMicrosecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
