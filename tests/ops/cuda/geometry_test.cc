// The cuda kernels of the geometric ops against the cpu kernels: the same
// pipeline with its map on "cuda" and on the cpu gives the same samples
// (the same random transforms; uint8 within a level, float32 within 1e-5).
// The tests that need a GPU skip, saying why, where there is none.

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/ops/geometry_params.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using cuda_testing::ExpectSameValues;
using cuda_testing::FirstBatch;
using cuda_testing::GpuAvailable;

struct Images {
  int rows, h, w, c;
};

std::string Describe(const Images& im) { return absl::StrCat(im.rows, " x ", im.h, "x", im.w, "x", im.c); }

// Non-constant pixels of `im` in a column "image" of T.
template <typename T = uint8_t>
PipelineBuilder Source(const Images& im) {
  std::vector<T> pixels(static_cast<size_t>(im.rows) * im.h * im.w * im.c);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<T>((i * 2654435761u >> 7) % 256);
  return PipelineBuilder::Arrays({MakeArrayColumn("image", {im.h, im.w, im.c}, pixels)});
}

// Builds the pipeline for `device`: source, batch of all rows, `ops`.
using Pipeline = std::function<PipelineDef(const std::string& device)>;

Pipeline MapOf(const Images& im, std::vector<OpSpec> ops) {
  return [im, ops](const std::string& device) { return Source(im).Batch(im.rows).Map(ops, 0, device).Build(); };
}

// Runs `pipeline` on both backends and compares the outputs value by value.
void ExpectCudaEqualsCpu(const Pipeline& pipeline) {
  ASSERT_OK_AND_ASSIGN(Batch cpu, FirstBatch(pipeline("cpu")));
  ASSERT_OK_AND_ASSIGN(Batch gpu, FirstBatch(pipeline("cuda")));
  ExpectSameValues(cpu.columns[0].values, gpu.columns[0].values, 1);
}

OpSpec ToFloat() { return Op("rescale", {{"scale", 1 / 255.0}}); }
OpSpec Flip(const char* mode = "horizontal") { return Op("random_flip", {{"mode", mode}}); }
OpSpec Rotation(const char* fill = "reflect", double fill_value = 0) {
  return Op("random_rotation", {{"degrees", 36.0}, {"fill_mode", fill}, {"fill_value", fill_value}});
}
OpSpec Zoom(const char* fill = "reflect", double fill_value = 0) {
  return Op("random_zoom", {{"scale", {0.9, 1.1}}, {"fill_mode", fill}, {"fill_value", fill_value}});
}
std::vector<OpSpec> Augment() { return {Flip(), Rotation(), Zoom()}; }

TEST(CudaGeometry, RegistersItsKernels) {
  for (const char* op : {"random_flip", "random_rotation", "random_zoom", kFusedWarpOp, "hwc_to_chw"}) {
    EXPECT_TRUE(OpRegistry::Global().Runs(op, Backend::kCuda)) << op;
  }
}

TEST(CudaGeometry, ACudaMapFusesConsecutiveWarps) {
  ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline c,
                       graph::Compile(Source({4, 8, 8, 3}).Map(Augment(), 0, "cuda").Build()));
  const std::vector<graph::BoundOp>& ops = c.nodes[1].ops;
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops.front().op, kFusedWarpOp);
  EXPECT_EQ(ops.front().name, "fused(random_flip+random_rotation+random_zoom)");
}

TEST(CudaGeometry, FusedAugmentationOfFloatImagesEqualsTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  std::vector<OpSpec> ops = {ToFloat()};
  for (OpSpec& op : Augment()) ops.push_back(op);
  ExpectCudaEqualsCpu(MapOf({1024, 32, 32, 3}, ops));
}

TEST(CudaGeometry, FusedAugmentationOfUint8ImagesEqualsTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  ExpectCudaEqualsCpu(MapOf({37, 9, 13, 3}, Augment()));
}

TEST(CudaGeometry, UnfusedWarpsEqualTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  const Images im{37, 9, 13, 3};
  ExpectCudaEqualsCpu([&](const std::string& device) {
    PipelineDef def = MapOf(im, {ToFloat(), Flip("horizontal_and_vertical"), Rotation(), Zoom()})(device);
    def.mutable_options()->set_no_fuse_warps(true);
    return def;
  });
}

TEST(CudaGeometry, EachWarpAloneEqualsTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  for (const OpSpec& warp : {Flip(), Flip("vertical"), Flip("horizontal_and_vertical"), Rotation(), Zoom()}) {
    SCOPED_TRACE(warp.op);
    ExpectCudaEqualsCpu(MapOf({33, 7, 5, 3}, {warp}));
    ExpectCudaEqualsCpu(MapOf({33, 7, 5, 3}, {ToFloat(), warp}));
  }
}

TEST(CudaGeometry, EveryFillModeEqualsTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  for (const char* fill : {"constant", "nearest", "reflect"}) {
    SCOPED_TRACE(fill);
    const std::vector<OpSpec> warps = {Rotation(fill, 77.5), Zoom(fill, 77.5)};
    ExpectCudaEqualsCpu(MapOf({29, 11, 6, 3}, warps));
    ExpectCudaEqualsCpu(MapOf({29, 11, 6, 3}, {ToFloat(), Rotation(fill, 0.25), Zoom(fill, 0.25)}));
  }
}

TEST(CudaGeometry, AnyChannelCountAndEdgeSizesEqualTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  for (const Images& im : {Images{1, 1, 1, 1}, Images{5, 1, 1, 3}, Images{1, 17, 3, 1}, Images{300, 6, 9, 2},
                           Images{7, 15, 11, 4}, Images{3, 2, 2, 5}}) {
    SCOPED_TRACE(Describe(im));
    ExpectCudaEqualsCpu(MapOf(im, Augment()));
    ExpectCudaEqualsCpu(MapOf(im, {ToFloat(), Flip("horizontal_and_vertical"), Rotation(), Zoom()}));
    ExpectCudaEqualsCpu(MapOf(im, {Flip("horizontal_and_vertical")}));
  }
}

TEST(CudaGeometry, HwcToChwEqualsTheCpu) {
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) GTEST_SKIP() << gpu.message();
  const OpSpec transpose = Op("hwc_to_chw");
  // Planes of a multiple of 4 pixels take the vector stores, others not.
  for (const Images& im : {Images{64, 32, 32, 3}, Images{5, 7, 5, 3}, Images{1, 1, 1, 1}, Images{9, 4, 6, 70}}) {
    SCOPED_TRACE(Describe(im));
    ExpectCudaEqualsCpu(MapOf(im, {transpose}));
    ExpectCudaEqualsCpu(MapOf(im, {ToFloat(), transpose}));
    ExpectCudaEqualsCpu([&](const std::string& device) {
      return Source<int64_t>(im).Batch(im.rows).Map({transpose}, 0, device).Build();
    });
  }
}

}  // namespace
}  // namespace sluice::ops
