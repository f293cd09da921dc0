// A decode op and an uncropped crop_mirror_normalize after it become one op
// that resamples into the normalized output; a crop keeps them apart.
#include "bound_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/ops/decode_params.h"

namespace sluice::graph {
namespace {

using testing::Bind;
using ::testing::ElementsAre;
using testing::Names;
using testing::OnCpu;

// Encoded images: a ragged uint8 column.
Schema Encoded() {
  ColumnSpec image{"image", DType::kUInt8, Shape{}};
  image.ragged = true;
  return Schema({image});
}

TEST(FuseDecodeNormalize, DecodeAndNormalizeBecomeOneOpWithBothKeys) {
  std::vector<BoundOp> ops = Bind(Encoded(), {{"decode_random_resized_crop", R"({"size": [32]})"},
                                              {"crop_mirror_normalize", R"({"mirror": 0.5})"}});
  FuseDecodeNormalize(OnCpu(), &ops);
  ASSERT_THAT(Names(ops), ElementsAre(ops::kFusedDecodeNormalizeOp));
  EXPECT_EQ(ops[0].op_key, 1u);  // the decode's draws
  EXPECT_EQ(ops[0].inferred.params<ops::FusedDecodeNormalizeParams>().normalize_key, 2u);
  EXPECT_EQ(ops[0].inferred.outputs[0].shape, (Shape{3, 32, 32}));
}

TEST(FuseDecodeNormalize, ACroppingNormalizeIsNotFused) {
  std::vector<BoundOp> ops = Bind(
      Encoded(), {{"decode_random_resized_crop", R"({"size": [32]})"}, {"crop_mirror_normalize", R"({"crop": [24]})"}});
  FuseDecodeNormalize(OnCpu(), &ops);
  EXPECT_THAT(Names(ops), ElementsAre("decode_random_resized_crop", "crop_mirror_normalize"));
}

}  // namespace
}  // namespace sluice::graph
