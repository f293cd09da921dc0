// resize, random_resized_crop and center_crop on the cuda backend: a map with device
// "cuda" outputs what the cpu kernel does (within a level), the random
// windows included. Built only with SLUICE_WITH_CUDA; the tests that need a
// GPU skip, saying why, where there is none.

#include <cstdlib>

#include "cuda_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using cuda_testing::ExpectSameValues;
using cuda_testing::FirstBatch;
using cuda_testing::GpuAvailable;

// `rows` uint8 images of `shape` ([H,W] or [H,W,C]) in one batch, of
// varied, non-constant levels.
PipelineBuilder Images(const std::vector<int64_t>& shape, int rows) {
  int64_t elems = rows;
  for (const int64_t d : shape) elems *= d;
  std::vector<uint8_t> pixels(elems);
  uint32_t state = 12345;
  for (uint8_t& p : pixels) {
    state = state * 1664525u + 1013904223u;
    p = static_cast<uint8_t>(state >> 24);
  }
  std::vector<int64_t> labels(rows, 0);
  return PipelineBuilder::Arrays({MakeArrayColumn("image", shape, pixels), MakeArrayColumn("label", {}, labels)})
      .Batch(rows);
}

// Runs `op` on `rows` images of `shape` on both backends and expects the
// same shape and levels within `levels`.
void ExpectBackendsAgree(const std::vector<int64_t>& shape, int rows, const OpSpec& op, int levels = 1) {
  SCOPED_TRACE(::testing::Message() << op.op << " on " << rows << " images of " << ::testing::PrintToString(shape));
  ASSERT_OK_AND_ASSIGN(Batch cpu, FirstBatch(Images(shape, rows).Map({op}).Build()));
  ASSERT_OK_AND_ASSIGN(Batch gpu, FirstBatch(Images(shape, rows).Map({op}, 0, "cuda").Build()));
  ExpectSameValues(cpu.columns[0].values, gpu.columns[0].values, levels);
}

TEST(ResampleCuda, RegistersItsKernels) {
  EXPECT_TRUE(OpRegistry::Global().Runs("resize", Backend::kCuda));
  EXPECT_TRUE(OpRegistry::Global().Runs("random_resized_crop", Backend::kCuda));
}

TEST(ResampleCuda, ResizeEqualsTheCpuKernel) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  ExpectBackendsAgree({23, 31, 3}, 37, Op("resize", {{"size", {17, 45}}}));  // shrinks one way, grows the other
  ExpectBackendsAgree({375, 500, 3}, 3, Op("resize", {{"size", {224}}}));
  ExpectBackendsAgree({1, 1, 3}, 5, Op("resize", {{"size", {5, 3}}}));
  ExpectBackendsAgree({9, 7, 1}, 1, Op("resize", {{"size", {1}}}));
  ExpectBackendsAgree({5, 6, 4}, 2, Op("resize", {{"size", {11, 2}}}));
  ExpectBackendsAgree({13, 8, 1}, 3, Op("resize", {{"size", {13, 8}}}));  // the same size
  ExpectBackendsAgree({300, 2, 1}, 2, Op("resize", {{"size", {3, 1}}}));  // many taps
}

TEST(ResampleCuda, RandomResizedCropDrawsTheCpuKernelsWindows) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  ExpectBackendsAgree({375, 500, 3}, 9, Op("random_resized_crop", {{"size", {224}}}));
  ExpectBackendsAgree({31, 17, 3}, 41, Op("random_resized_crop", {{"size", {9, 12}}}));
  ExpectBackendsAgree({20, 20, 2}, 7,
                      Op("random_resized_crop", {{"size", {7}}, {"scale", {0.2, 0.3}}, {"ratio", {0.5, 3.0}}}));
  ExpectBackendsAgree({1, 1, 3}, 1, Op("random_resized_crop", {{"size", {2}}}));
}

TEST(ResampleCuda, CenterCropEqualsTheCpuKernel) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  // Edge sizes, channel counts with (1, 3, 4) and without (2, 5) a dedicated
  // kernel, crops with odd margins.
  const std::vector<std::vector<int64_t>> shapes = {{1, 1, 3},   {5, 7, 3}, {9, 13, 1}, {6, 10, 4},
                                                    {11, 17, 2}, {7, 5, 5}, {64, 64, 3}};
  for (const std::vector<int64_t>& shape : shapes) {
    for (const std::vector<int64_t>& size : {std::vector<int64_t>{shape[0], shape[1]},
                                             std::vector<int64_t>{(shape[0] + 1) / 2, (shape[1] + 2) / 3},
                                             {1}}) {
      ExpectBackendsAgree(shape, 3, Op("center_crop", {{"size", size}}), /*levels=*/0);
    }
  }
}

}  // namespace
}  // namespace sluice::ops
