// hwc_to_chw right after a resampling warp on the same column folds into it:
// the warp writes [C,H,W].
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

TEST(FuseLayout, TheWarpWritesPlanes) {
  std::vector<BoundOp> ops =
      Bind(Image(DType::kFloat32, 6, 10), {{"random_zoom", R"({"scale": [0.9, 1.1]})"}, {"hwc_to_chw", "{}"}});
  FuseLayout(OnCpu(), &ops);
  ASSERT_THAT(Names(ops), ElementsAre("random_zoom"));
  EXPECT_TRUE(ops[0].inferred.params<ops::WarpParams>().spec.chw_out);
  EXPECT_EQ(ops[0].inferred.outputs[0].shape, (Shape{3, 6, 10}));
  EXPECT_EQ(ops[0].name, "random_zoom+hwc_to_chw");
}

TEST(FuseLayout, AFlipKeepsItsTranspose) {
  std::vector<BoundOp> ops = Bind(Image(DType::kFloat32), {{"random_flip", "{}"}, {"hwc_to_chw", "{}"}});
  FuseLayout(OnCpu(), &ops);
  EXPECT_THAT(Names(ops), ElementsAre("random_flip", "hwc_to_chw"));
}

}  // namespace
}  // namespace sluice::graph
