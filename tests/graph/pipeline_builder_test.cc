// The C++ builder writes the PipelineDef the JSON form would: nodes in order
// with their names, typed attrs, options, and a distribute node where asked.
#include "sluice/pipeline_builder.h"

#include "gtest/gtest.h"
#include "sluice/graph/pipeline_json.h"
#include "status_matchers.h"

namespace sluice {
namespace {

TEST(PipelineBuilder, WritesTheNodesAttrsAndOptionsInOrder) {
  const PipelineDef def =
      PipelineBuilder::TfRecord({"a-*.tfrecord"}, {BytesFeature("image", 3072), Int64Feature("label")})
          .ShuffleSplits()
          .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("gaussian_blur", {{"sigma", 0.8}})})
          .Named("augment")
          .Shuffle(100)
          .Batch(16, /*drop_remainder=*/true)
          .Prefetch(2)
          .Seed(7)
          .Threads(3)
          .Name("p")
          .Build();
  ASSERT_EQ(def.nodes_size(), 5);
  EXPECT_EQ(def.name(), "p");
  EXPECT_EQ(def.seed(), 7u);
  EXPECT_EQ(def.options().threads(), 3);
  const SourceDef& source = def.nodes(0).source();
  EXPECT_TRUE(source.shuffle_splits());
  ASSERT_EQ(source.tfrecord().features_size(), 2);
  EXPECT_EQ(source.tfrecord().features(0).name(), "image");
  EXPECT_EQ(def.nodes(1).name(), "augment");
  ASSERT_EQ(def.nodes(1).map().ops_size(), 2);
  const auto& shape = def.nodes(1).map().ops(0).attrs().fields().at("shape").list_value();
  ASSERT_EQ(shape.values_size(), 3);
  EXPECT_EQ(shape.values(2).number_value(), 3);
  EXPECT_EQ(def.nodes(1).map().ops(1).attrs().fields().at("sigma").number_value(), 0.8);
  EXPECT_EQ(def.nodes(2).shuffle().buffer_size(), 100);
  EXPECT_EQ(def.nodes(3).batch().size(), 16);
  EXPECT_TRUE(def.nodes(3).batch().drop_remainder());
  EXPECT_EQ(def.nodes(4).prefetch().buffer_size(), 2);
}

TEST(PipelineBuilder, WhatItBuildsRoundTripsThroughJson) {
  const PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("x", {2}, std::vector<float>{1, 2, 3, 4})})
                              .Map({Op("rescale", {{"scale", 0.5}})})
                              .Distribute({})
                              .Batch(2)
                              .Build();
  ASSERT_OK_AND_ASSIGN(const PipelineDef back, graph::PipelineFromJson(graph::PipelineToJson(def)));
  EXPECT_EQ(back.SerializeAsString(), def.SerializeAsString());
  EXPECT_TRUE(def.nodes(2).has_distribute());
}

}  // namespace
}  // namespace sluice
