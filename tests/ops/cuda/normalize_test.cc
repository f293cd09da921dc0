// The cuda kernel of crop_mirror_normalize against the cpu kernel: the same pipeline with its map on "cuda" and on the
// cpu gives the same samples (the same mirrors; bit-identical values, since both compute a * level + b as one fused
// multiply-add). The tests that need a GPU skip, saying why, where there is none.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using cuda_testing::ExpectCudaMapEqualsCpu;
using cuda_testing::FirstBatch;
using cuda_testing::GpuAvailable;

struct Images {
  int rows, h, w, c;
};

// Non-constant pixels of `im` in a column "image".
PipelineBuilder Source(const Images& im) {
  std::vector<uint8_t> pixels(static_cast<size_t>(im.rows) * im.h * im.w * im.c);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 2654435761u >> 7) % 256);
  return PipelineBuilder::Arrays({MakeArrayColumn("image", {im.h, im.w, im.c}, pixels)});
}

TEST(CudaNormalizeKernels, AreRegistered) {
  EXPECT_TRUE(OpRegistry::Global().Runs("crop_mirror_normalize", Backend::kCuda));
}

// Edge sizes and the channel counts with (1, 3, 4) and without (2, 5) a
// dedicated kernel; crops with odd margins.
const Images kShapes[] = {{5, 1, 1, 3},   {37, 5, 7, 3}, {3, 9, 13, 1}, {4, 6, 10, 4},
                          {2, 11, 17, 2}, {3, 7, 5, 5},  {2, 64, 64, 3}};

TEST(CudaNormalizeKernels, CropMirrorNormalizeEqualsTheCpuKernel) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  for (const Images& im : kShapes) {
    for (const char* dtype : {"float32", "float16", "uint8"}) {
      for (const char* layout : {"CHW", "HWC"}) {
        for (double mirror : {0.0, 0.5, 1.0}) {
          for (bool crop : {false, true}) {
            SCOPED_TRACE(absl::StrCat(im.rows, " x ", im.h, "x", im.w, "x", im.c, " ", dtype, " ", layout, " mirror ",
                                      mirror, crop ? " cropped" : ""));
            const std::vector<double> mean(im.c, 0.3), std_dev(im.c, 0.2);
            OpSpec op =
                Op("crop_mirror_normalize",
                   {{"dtype", dtype}, {"layout", layout}, {"mirror", mirror}, {"mean", mean}, {"std", std_dev}});
            if (crop) op.attrs.emplace_back("crop", std::vector<int64_t>{(im.h + 1) / 2, (im.w + 2) / 3});
            ExpectCudaMapEqualsCpu(Source(im), im.rows, op);
          }
        }
      }
    }
  }
}

TEST(CudaNormalizeKernels, CropMirrorNormalizeMirrorsTheSameSamples) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  // Per-channel mean and std, and rows enough that both draws occur.
  const OpSpec op = Op("crop_mirror_normalize", {{"mirror", 0.5}, {"mean", {0.1, 0.5, 0.9}}, {"std", {0.3, 0.2, 0.1}}});
  ExpectCudaMapEqualsCpu(Source({200, 3, 8, 3}), 200, op);
}

}  // namespace
}  // namespace sluice::ops
