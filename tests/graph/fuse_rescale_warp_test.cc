// A uint8 rescale right before a resampling warp folds into the warp, which
// then reads uint8 and writes the rescaled float output.
#include "bound_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/ops/geometry_params.h"

namespace sluice::graph {
namespace {

using testing::Bind;
using ::testing::ElementsAre;
using testing::Image;
using testing::Names;
using testing::OnCpu;

TEST(FuseRescaleIntoWarp, TheWarpReadsUint8AndRescalesItsOutput) {
  std::vector<BoundOp> ops = Bind(
      Image(DType::kUInt8), {{"rescale", R"({"scale": 0.5, "offset": 1})"}, {"random_rotation", R"({"degrees": 20})"}});
  FuseRescaleIntoWarp(OnCpu(), &ops);
  ASSERT_THAT(Names(ops), ElementsAre("random_rotation"));
  const kernels::WarpSpec& spec = ops[0].inferred.params<ops::WarpParams>().spec;
  EXPECT_TRUE(spec.rescaled);
  EXPECT_EQ(spec.dtype, DType::kUInt8);
  EXPECT_FLOAT_EQ(spec.scale, 0.5f);
  EXPECT_FLOAT_EQ(spec.offset, 1.f);
  EXPECT_EQ(ops[0].inferred.outputs[0].dtype, DType::kFloat32);
}

TEST(FuseRescaleIntoWarp, AFlipDoesNotResampleAndKeepsItsRescale) {
  std::vector<BoundOp> ops = Bind(Image(DType::kUInt8), {{"rescale", R"({"scale": 0.5})"}, {"random_flip", "{}"}});
  FuseRescaleIntoWarp(OnCpu(), &ops);
  EXPECT_THAT(Names(ops), ElementsAre("rescale", "random_flip"));
}

TEST(FuseRescaleIntoWarp, OffTheCpuNothingFolds) {
  std::vector<BoundOp> ops =
      Bind(Image(DType::kUInt8), {{"rescale", R"({"scale": 0.5})"}, {"random_rotation", R"({"degrees": 20})"}});
  FuseRescaleIntoWarp({ops::OpRegistry::Global(), ops::Backend::kCuda}, &ops);
  EXPECT_THAT(Names(ops), ElementsAre("rescale", "random_rotation"));
}

}  // namespace
}  // namespace sluice::graph
