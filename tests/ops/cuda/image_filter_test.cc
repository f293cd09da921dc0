// gaussian_blur and grey_dilation on the cuda backend equal the cpu kernels:
// the same pipeline mapped on each device, compared value by value (uint8
// within 1, float32 within 1e-5 relative). Built only with SLUICE_WITH_CUDA;
// the tests that need a GPU skip, saying why, where there is none.

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

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

// Random, non-constant images: `rows` of `shape`.
template <typename T>
std::vector<T> RandomImages(int64_t rows, const std::vector<int64_t>& shape) {
  int64_t n = rows;
  for (int64_t d : shape) n *= d;
  std::mt19937 gen(static_cast<uint32_t>(n));
  std::uniform_real_distribution<float> value(0.f, 255.f);
  std::vector<T> images(n);
  for (T& v : images) v = static_cast<T>(std::is_same_v<T, float> ? value(gen) / 255.f : value(gen));
  return images;
}

// Maps `ops` over a batch of `rows` random images on each device and
// compares the outputs.
template <typename T>
void ExpectCudaEqualsCpu(const std::vector<int64_t>& shape, int64_t rows, const std::vector<OpSpec>& ops) {
  const PipelineBuilder images =
      PipelineBuilder::Arrays({MakeArrayColumn("image", shape, RandomImages<T>(rows, shape))}).Batch(rows);
  ASSERT_OK_AND_ASSIGN(Batch cpu, FirstBatch(PipelineBuilder(images).Map(ops).Build()));
  ASSERT_OK_AND_ASSIGN(Batch gpu, FirstBatch(PipelineBuilder(images).Map(ops, 0, "cuda").Build()));
  ExpectSameValues(cpu.columns[0].values, gpu.columns[0].values, 1);
}

std::string ShapeName(const std::vector<int64_t>& shape, int64_t rows) {
  std::string name = std::to_string(rows) + " of [";
  for (int64_t d : shape) name += std::to_string(d) + ",";
  return name + "]";
}

TEST(CudaFilters, RegisterTheirKernels) {
  EXPECT_TRUE(OpRegistry::Global().Runs("gaussian_blur", Backend::kCuda));
  EXPECT_TRUE(OpRegistry::Global().Runs("grey_dilation", Backend::kCuda));
}

TEST(CudaFilters, BlurWithASigmaDrawnPerSampleEqualsTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  // W1's blur, float32 28x28, on a batch that is not a whole number of blocks.
  ExpectCudaEqualsCpu<float>({28, 28}, 37, {Op("gaussian_blur", {{"ksize", 11}, {"sigma", {0.1, 2.0}}})});
}

TEST(CudaFilters, DilationThenBlurOnUint8EqualsTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  // W2's chain on uint8 32x32x3.
  ExpectCudaEqualsCpu<uint8_t>(
      {32, 32, 3}, 37, {Op("grey_dilation", {{"size", 3}}), Op("gaussian_blur", {{"ksize", 11}, {"sigma", 0.8}})});
}

TEST(CudaFilters, EdgeSizesEqualTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  // Kernels wider than the image (reflected more than once), unequal kh and
  // kw, odd sizes, and channel counts that no vector width divides.
  const std::vector<OpSpec> ops = {Op("grey_dilation", {{"size", {5.0, 3.0}}}),
                                   Op("gaussian_blur", {{"ksize", {3.0, 7.0}}, {"sigma", {0.5, 1.5}}}),
                                   Op("gaussian_blur", {{"ksize", 11}, {"sigma", 1.2}})};
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{1, 1}, {1, 7}, {7, 1}, {5, 3, 2}, {3, 5, 4}, {9, 2, 3}}) {
    for (int64_t rows : {1, 5}) {
      SCOPED_TRACE(ShapeName(shape, rows));
      ExpectCudaEqualsCpu<float>(shape, rows, ops);
      ExpectCudaEqualsCpu<uint8_t>(shape, rows, ops);
    }
  }
}

TEST(CudaFilters, ImagesLargerThanSharedMemoryEqualTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  // Filtered in two passes through global memory.
  const std::vector<OpSpec> ops = {Op("grey_dilation", {{"size", {3.0, 5.0}}}),
                                   Op("gaussian_blur", {{"ksize", {7.0, 9.0}}, {"sigma", {0.5, 2.0}}})};
  ExpectCudaEqualsCpu<float>({96, 80, 3}, 3, ops);
  ExpectCudaEqualsCpu<uint8_t>({150, 101, 3}, 2, ops);
}

}  // namespace
}  // namespace sluice::ops
