// The cuda kernels of crop_mirror_normalize, cast and center_crop against
// the cpu kernels: the same pipeline with its map on "cuda" and on the cpu
// gives the same samples (the same mirrors; bit-identical values, since
// both compute a * level + b as one fused multiply-add). The tests that
// need a GPU skip, saying why, where there is none.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"
#include "cuda_test_util.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using cuda_testing::ExpectSameValues;
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

// `source` batched whole and mapped by `op` on the cpu and on "cuda": the
// same shape, dtype and bytes (float32 within 1e-5 relative).
void ExpectCudaEqualsCpu(const PipelineBuilder& source, int rows, const OpSpec& op) {
  ASSERT_OK_AND_ASSIGN(Batch cpu, FirstBatch(PipelineBuilder(source).Batch(rows).Map({op}).Build()));
  ASSERT_OK_AND_ASSIGN(Batch gpu, FirstBatch(PipelineBuilder(source).Batch(rows).Map({op}, 0, "cuda").Build()));
  ExpectSameValues(cpu.columns[0].values, gpu.columns[0].values, 0);
}

TEST(CudaNormalizeKernels, AreRegistered) {
  for (const char* op : {"crop_mirror_normalize", "cast", "center_crop"}) {
    EXPECT_TRUE(OpRegistry::Global().Runs(op, Backend::kCuda)) << op;
  }
}

// Edge sizes and the channel counts with (1, 3, 4) and without (2, 5) a
// dedicated kernel; crops with odd margins.
const Images kShapes[] = {{5, 1, 1, 3}, {37, 5, 7, 3}, {3, 9, 13, 1}, {4, 6, 10, 4},
                          {2, 11, 17, 2}, {3, 7, 5, 5}, {2, 64, 64, 3}};

TEST(CudaNormalizeKernels, CropMirrorNormalizeEqualsTheCpuKernel) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  for (const Images& im : kShapes) {
    for (const char* dtype : {"float32", "float16", "uint8"}) {
      for (const char* layout : {"CHW", "HWC"}) {
        for (double mirror : {0.0, 0.5, 1.0}) {
          for (bool crop : {false, true}) {
            SCOPED_TRACE(absl::StrCat(im.rows, " x ", im.h, "x", im.w, "x", im.c, " ", dtype, " ", layout,
                                      " mirror ", mirror, crop ? " cropped" : ""));
            const std::vector<double> mean(im.c, 0.3), std_dev(im.c, 0.2);
            OpSpec op = Op("crop_mirror_normalize", {{"dtype", dtype}, {"layout", layout}, {"mirror", mirror},
                                                     {"mean", mean}, {"std", std_dev}});
            if (crop) op.attrs.emplace_back("crop", std::vector<int64_t>{(im.h + 1) / 2, (im.w + 2) / 3});
            ExpectCudaEqualsCpu(Source(im), im.rows, op);
          }
        }
      }
    }
  }
}

TEST(CudaNormalizeKernels, CropMirrorNormalizeMirrorsTheSameSamples) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  // Per-channel mean and std, and rows enough that both draws occur.
  const OpSpec op =
      Op("crop_mirror_normalize", {{"mirror", 0.5}, {"mean", {0.1, 0.5, 0.9}}, {"std", {0.3, 0.2, 0.1}}});
  ExpectCudaEqualsCpu(Source({200, 3, 8, 3}), 200, op);
}

TEST(CudaNormalizeKernels, CenterCropEqualsTheCpuKernel) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  for (const Images& im : kShapes) {
    for (const std::vector<int64_t>& size : {std::vector<int64_t>{im.h, im.w},
                                             std::vector<int64_t>{(im.h + 1) / 2, (im.w + 2) / 3}, {1}}) {
      SCOPED_TRACE(absl::StrCat(im.rows, " x ", im.h, "x", im.w, "x", im.c, " to ", size[0]));
      ExpectCudaEqualsCpu(Source(im), im.rows, Op("center_crop", {{"size", size}}));
    }
  }
}

// Values at and past every dtype's limits, NaN and infinities among them;
// odd counts, so that the vectorized kernel's tail runs.
template <typename T>
std::vector<T> Edgy(int n) {
  const double specials[] = {0,     1,     -1,   0.5,  -0.5,  255.9, 256,   -129,        1e10,       -1e10,
                             2147483647.0, -2147483648.0, 4e9, 9.3e18, -9.3e18, 1e30, -1e30};
  std::vector<T> values(n);
  for (int i = 0; i < n; ++i) {
    const double v = i < static_cast<int>(std::size(specials)) ? specials[i]
                                                               : ((i * 2654435761u) % 100000) * 0.37 - 9000;
    if constexpr (std::is_floating_point_v<T>) {
      values[i] = static_cast<T>(v);
    } else {
      using L = std::numeric_limits<T>;  // saturated here: the conversion of a value out of range is undefined
      values[i] = v <= static_cast<double>(L::lowest()) ? L::lowest()
                  : v >= static_cast<double>(L::max())  ? L::max()
                                                        : static_cast<T>(v);
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    values[n - 1] = std::numeric_limits<T>::quiet_NaN();
    values[n - 2] = std::numeric_limits<T>::infinity();
    values[n - 3] = -std::numeric_limits<T>::infinity();
  }
  return values;
}

TEST(CudaNormalizeKernels, CastEqualsTheCpuKernelForEveryDtypePair) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  constexpr int kRows = 9, kPerRow = 23;
  const PipelineBuilder sources[] = {
      PipelineBuilder::Arrays({MakeArrayColumn("x", {kPerRow}, Edgy<uint8_t>(kRows * kPerRow))}),
      PipelineBuilder::Arrays({MakeArrayColumn("x", {kPerRow}, Edgy<int32_t>(kRows * kPerRow))}),
      PipelineBuilder::Arrays({MakeArrayColumn("x", {kPerRow}, Edgy<int64_t>(kRows * kPerRow))}),
      PipelineBuilder::Arrays({MakeArrayColumn("x", {kPerRow}, Edgy<float>(kRows * kPerRow))})};
  for (const PipelineBuilder& source : sources) {
    for (const char* to : {"uint8", "int32", "int64", "float32"}) {
      SCOPED_TRACE(to);
      ExpectCudaEqualsCpu(source, kRows, Op("cast", {{"field", "x"}, {"dtype", to}}));
    }
  }
  // Many values: the vectorized kernel over several blocks, and a batch of 1.
  ExpectCudaEqualsCpu(PipelineBuilder::Arrays({MakeArrayColumn("x", {100003}, Edgy<float>(100003))}), 1,
                      Op("cast", {{"field", "x"}, {"dtype", "uint8"}}));
}

}  // namespace
}  // namespace sluice::ops
