#include "sluice/placement/kept_prefix.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/pipeline_builder.h"

namespace sluice::placement {
namespace {

// The prefix's output as written (uint8 images and int64 labels), not the
// node it ends in: the compiler fuses its map with the float32 one after
// it, whose rows are 4x the bytes (placement "auto" said 585 MB to write
// for W2, and wrote 155.5 MB).
TEST(KeptPrefix, ItsRowsAreThePrefixsOutputNotTheFusedNodes) {
  std::vector<uint8_t> pixels(10 * 48, 7);
  std::vector<int64_t> labels(10, 1);
  PipelineBuilder b =
      PipelineBuilder::Arrays({MakeArrayColumn("image", {48}, pixels), MakeArrayColumn("label", {}, labels)});
  b.Map({Op("reshape", {{"field", "image"}, {"shape", {4, 4, 3}}})});
  b.Map({Op("normalize", {{"field", "image"}, {"mean", {0.5}}, {"std", {0.25}}})});
  const KeptPrefix kept(b.Build(), 1);
  EXPECT_EQ(kept.row_bytes(), 48 + 8);
}

}  // namespace
}  // namespace sluice::placement
