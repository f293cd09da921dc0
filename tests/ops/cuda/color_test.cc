// The cuda backend end to end: a map with device "cuda" copies its inputs
// to the GPU, runs cast, rescale and normalize there and outputs device memory
// equal to the cpu kernels' output. Built only with SLUICE_WITH_CUDA; the
// tests that need a GPU skip, saying why, where there is none.

#include <fstream>
#include <iterator>
#include <limits>
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

using cuda_testing::ExpectCudaMapEqualsCpu;
using cuda_testing::ExpectSameValues;
using cuda_testing::FirstBatch;
using cuda_testing::GpuAvailable;

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int kRows = 37, kH = 5, kW = 7, kC = 3;

PipelineBuilder Images() {
  std::vector<uint8_t> pixels(kRows * kH * kW * kC);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  std::vector<int64_t> labels(kRows);
  for (int r = 0; r < kRows; ++r) labels[r] = r;
  return PipelineBuilder::Arrays(
      {MakeArrayColumn("image", {kH, kW, kC}, pixels), MakeArrayColumn("label", {}, labels)});
}

std::vector<OpSpec> Tail() {
  return {Op("rescale", {{"scale", 1 / 255.0}, {"offset", -0.25}}),
          Op("normalize", {{"mean", {0.1, 0.2, 0.3}}, {"std", {0.5, 0.25, 2.0}}, {"layout", "HWC"}})};
}

TEST(CudaBackend, RegistersItsRuntimeAndKernels) {
  const OpRegistry& registry = OpRegistry::Global();
  ASSERT_NE(registry.runtime(Backend::kCuda), nullptr);
  EXPECT_TRUE(registry.Runs("rescale", Backend::kCuda));
  EXPECT_TRUE(registry.Runs("normalize", Backend::kCuda));
  EXPECT_TRUE(registry.Runs("reshape", Backend::kCuda));  // a view
  // The decode ops have one only where the build found nvJPEG.
#ifdef SLUICE_WITH_NVJPEG
  EXPECT_TRUE(registry.Runs("decode_image", Backend::kCuda));
#else
  EXPECT_FALSE(registry.Runs("decode_image", Backend::kCuda));
  const std::string empty = ::testing::TempDir() + "/empty.tfrecord";
  std::ofstream(empty).flush();
  const PipelineBuilder encoded = PipelineBuilder::TfRecord({empty}, {BytesFeature("image", 0)});
  EXPECT_THAT(graph::Compile(PipelineBuilder(encoded).Map({Op("decode_image", {{"size", {8}}})}, 0, "cuda").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'decode_image' has no cuda kernel (it runs on: cpu); run it in a map of its "
                                 "own on one of those (builds with nvJPEG decode on cuda: docs/gpu.md)")));
#endif
  EXPECT_FALSE(registry.Runs("random_perspective", Backend::kCuda));
  EXPECT_THAT(graph::Compile(Images().Map({Op("random_perspective", {})}, 0, "cuda").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'random_perspective' has no cuda kernel (it runs on: cpu)")));
}

TEST(CudaBackend, WithoutAGpuAPipelineSaysWhyWhenCreated) {
  if (GpuAvailable().ok()) GTEST_SKIP() << "a GPU is present";
  EXPECT_THAT(exec::Pipeline::Create(Images().Batch(kRows).Map(Tail(), 0, "cuda").Build()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("node 'map_2': device \"cuda\": no CUDA device can be used")));
}

TEST(CudaBackend, RescaleAndNormalizeOnTheDeviceEqualTheCpuKernels) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  ASSERT_OK_AND_ASSIGN(Batch cpu, FirstBatch(Images().Batch(kRows).Map(Tail()).Build()));
  ASSERT_OK_AND_ASSIGN(Batch gpu, FirstBatch(Images().Batch(kRows).Map(Tail(), 0, "cuda").Build()));
  ASSERT_EQ(gpu.columns.size(), 2u);
  EXPECT_EQ(gpu.columns[0].values.shape(), (Shape{kRows, kH, kW, kC}));
  EXPECT_NE(gpu.columns[1].values.memory_kind(), MemoryKind::kDevice) << "columns no op reads stay on the host";
  ExpectSameValues(cpu.columns[0].values, gpu.columns[0].values, 0);
}

// Values at and past every dtype's limits, NaN and infinities among them;
// odd counts, so that the vectorized kernel's tail runs.
template <typename T>
std::vector<T> Edgy(int n) {
  const double specials[] = {0,   1,      -1,      0.5,   -0.5,         255.9,
                             256, -129,   1e10,    -1e10, 2147483647.0, -2147483648.0,
                             4e9, 9.3e18, -9.3e18, 1e30,  -1e30};
  std::vector<T> values(n);
  for (int i = 0; i < n; ++i) {
    const double v =
        i < static_cast<int>(std::size(specials)) ? specials[i] : ((i * 2654435761u) % 100000) * 0.37 - 9000;
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

TEST(CudaBackend, CastEqualsTheCpuKernelForEveryDtypePair) {
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
      ExpectCudaMapEqualsCpu(source, kRows, Op("cast", {{"field", "x"}, {"dtype", to}}));
    }
  }
  // Many values: the vectorized kernel over several blocks, and a batch of 1.
  ExpectCudaMapEqualsCpu(PipelineBuilder::Arrays({MakeArrayColumn("x", {100003}, Edgy<float>(100003))}), 1,
                         Op("cast", {{"field", "x"}, {"dtype", "uint8"}}));
}

}  // namespace
}  // namespace sluice::ops
