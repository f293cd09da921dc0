#include "sluice/graph/fold_receive.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::graph {
namespace {

constexpr int kRows = 8;

// Images and labels in memory, handed to the service at the distribute node
// (which nodes follow is each test's).
PipelineBuilder Source() {
  return PipelineBuilder::Arrays({MakeArrayColumn("image", {4, 4, 3}, std::vector<uint8_t>(kRows * 48, 7)),
                                  MakeArrayColumn("label", {}, std::vector<int64_t>(kRows, 1))});
}

// The consumer's part of `def`, compiled as the service's client compiles it.
absl::StatusOr<CompiledPipeline> ConsumerPart(const PipelineDef& def, bool fold = true) {
  const Schema wire({ColumnSpec{"image", DType::kUInt8, Shape{4, 4, 3}}, ColumnSpec{"label", DType::kInt64, Shape{}}});
  CompileRange range{1, -1, wire, false};
  range.fold_into_remote = fold;
  return Compile(def, ops::OpRegistry::Global(), range);
}

std::vector<std::string> OpNames(const CompiledNode& node) {
  std::vector<std::string> names;
  for (const BoundOp& op : node.ops) names.push_back(op.name);
  return names;
}

TEST(FoldIntoReceive, TheFirstElementwiseOpAfterTheDistributeNodeRunsAsTheColumnArrives) {
  const PipelineDef def =
      Source().Distribute().Batch(4).Map({Op("rescale", {{"scale", 1 / 255.0}}), Op("random_flip")}).Build();
  ASSERT_OK_AND_ASSIGN(CompiledPipeline unfolded, ConsumerPart(def, false));
  ASSERT_OK_AND_ASSIGN(CompiledPipeline c, ConsumerPart(def));
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.nodes[0].kind, NodeKind::kRemote);
  EXPECT_THAT(OpNames(c.nodes[0]), ::testing::ElementsAre("rescale"));
  // The batch between passes the converted column on; the map keeps the rest.
  EXPECT_EQ(c.nodes[0].output_schema.ToString(), "{image: float32[4,4,3], label: int64[]}");
  EXPECT_EQ(c.nodes[1].input_schema.ToString(), "{image: float32[4,4,3], label: int64[]}");
  EXPECT_EQ(c.nodes[2].input_schema.ToString(), "{image: float32[4,4,3], label: int64[]}");
  EXPECT_THAT(OpNames(c.nodes[2]), ::testing::ElementsAre("random_flip"));
  EXPECT_EQ(c.output_schema().ToString(), unfolded.output_schema().ToString());
  EXPECT_TRUE(unfolded.nodes[0].ops.empty());
}

TEST(FoldIntoReceive, OneOpPerColumnAndAMapLeftEmptyGoesAway) {
  const PipelineDef def = Source()
                              .Distribute()
                              .Map({Op("normalize", {{"mean", {0.5, 0.4, 0.3}}, {"std", {0.2, 0.2, 0.2}}}),
                                    Op("cast", {{"field", "label"}, {"dtype", "float32"}})})
                              .Prefetch()
                              .Build();
  ASSERT_OK_AND_ASSIGN(CompiledPipeline both, ConsumerPart(def));
  ASSERT_EQ(both.nodes.size(), 2u);
  EXPECT_THAT(OpNames(both.nodes[0]), ::testing::ElementsAre("normalize", "cast"));
  EXPECT_EQ(both.nodes[1].kind, NodeKind::kPrefetch);
  EXPECT_EQ(both.output_schema().ToString(), "{image: float32[4,4,3], label: float32[]}");

  // A second op on a column already folded stays in the map.
  const PipelineDef twice =
      Source().Distribute().Map({Op("rescale", {{"scale", 2.0}}), Op("rescale", {{"scale", 3.0}})}).Build();
  ASSERT_OK_AND_ASSIGN(CompiledPipeline c, ConsumerPart(twice));
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_THAT(OpNames(c.nodes[0]), ::testing::ElementsAre("rescale"));
  EXPECT_THAT(OpNames(c.nodes[1]), ::testing::ElementsAre("rescale"));
}

TEST(FoldIntoReceive, NothingFoldsPastAnOpThatIsNotElementwiseOrWhenNotAsked) {
  const PipelineDef flip_first =
      Source().Distribute().Map({Op("random_flip"), Op("rescale", {{"scale", 2.0}})}).Build();
  ASSERT_OK_AND_ASSIGN(CompiledPipeline c, ConsumerPart(flip_first));
  EXPECT_TRUE(c.nodes[0].ops.empty());
  EXPECT_EQ(c.nodes[1].ops.size(), 2u);

  PipelineDef opted_out = Source().Distribute().Map({Op("rescale", {{"scale", 2.0}})}).Build();
  opted_out.mutable_options()->set_no_fuse_receive(true);
  ASSERT_OK_AND_ASSIGN(CompiledPipeline kept, ConsumerPart(opted_out));
  EXPECT_TRUE(kept.nodes[0].ops.empty());
  ASSERT_EQ(kept.nodes.size(), 2u);

  // A shuffle in between is not a node the fold looks past.
  const PipelineDef shuffled = Source().Distribute().Shuffle(4).Map({Op("rescale", {{"scale", 2.0}})}).Build();
  ASSERT_OK_AND_ASSIGN(CompiledPipeline s, ConsumerPart(shuffled));
  EXPECT_TRUE(s.nodes[0].ops.empty());
}

}  // namespace
}  // namespace sluice::graph
