// Consecutive warps on one column become one fused warp whose parts keep
// their own keys; anything between them, or another column, keeps them apart.
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

TEST(FuseWarps, ConsecutiveWarpsBecomeOneWithEachPartsKey) {
  std::vector<BoundOp> ops = Bind(
      Image(DType::kFloat32),
      {{"random_flip", "{}"}, {"random_rotation", R"({"degrees": 20})"}, {"random_zoom", R"({"scale": [0.9, 1.1]})"}});
  FuseWarps(OnCpu(), &ops);
  ASSERT_THAT(Names(ops), ElementsAre(ops::kFusedWarpOp));
  const auto& params = ops[0].inferred.params<ops::FusedWarpParams>();
  ASSERT_EQ(params.parts.size(), 3u);
  EXPECT_EQ(params.parts[0].second, 1u);  // the flip's own key
  EXPECT_EQ(params.parts[2].second, 3u);
  EXPECT_EQ(params.parts[1].first.kind, ops::WarpPart::Kind::kRotation);
}

TEST(FuseWarps, AnOpBetweenWarpsKeepsThemApart) {
  std::vector<BoundOp> ops = Bind(Image(DType::kFloat32), {{"random_rotation", R"({"degrees": 20})"},
                                                           {"rescale", R"({"scale": 2.0})"},
                                                           {"random_zoom", R"({"scale": [0.9, 1.1]})"}});
  FuseWarps(OnCpu(), &ops);
  EXPECT_THAT(Names(ops), ElementsAre("random_rotation", "rescale", "random_zoom"));
}

TEST(FuseWarps, WarpsWithOtherBordersAreNotFused) {
  std::vector<BoundOp> ops =
      Bind(Image(DType::kFloat32), {{"random_rotation", R"({"degrees": 20, "fill_mode": "constant"})"},
                                    {"random_zoom", R"({"scale": [0.9, 1.1], "fill_mode": "reflect"})"}});
  FuseWarps(OnCpu(), &ops);
  EXPECT_THAT(Names(ops), ElementsAre("random_rotation", "random_zoom"));
}

}  // namespace
}  // namespace sluice::graph
