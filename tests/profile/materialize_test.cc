#include "sluice/profile/materialize.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::profile {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

class MaterializeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Join("in"));
    testing::WriteCifarTfRecords(dir_.Join("in"), 90, 3);
  }

  // Every column's bytes of every batch of epochs 0 and 1, in order.
  static std::string Output(const PipelineDef& def) {
    absl::StatusOr<std::unique_ptr<exec::Pipeline>> p = exec::Pipeline::Create(def);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return "";
    std::string out;
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      auto it = (*p)->Iterate(epoch);
      while (true) {
        Batch b;
        bool end = false;
        EXPECT_TRUE(it->Next(&b, &end).ok());
        if (end) break;
        for (const Column& c : b.columns) {
          out.append(reinterpret_cast<const char*>(c.values.raw_data()), c.values.byte_size());
        }
      }
    }
    return out;
  }

  PipelineBuilder Source() {
    PipelineBuilder b =
        PipelineBuilder::TfRecord({dir_.Join("in/*.tfrecord")}, {BytesFeature("image", 3072), Int64Feature("label")});
    return b;
  }

  testing::TempDir dir_;
};

TEST_F(MaterializeTest, TheRewrittenPipelineGivesBitIdenticalOutput) {
  // A deterministic prefix ending in float32, then shuffled splits, a batch
  // and random warps keyed by each sample's file and record.
  PipelineDef def =
      Source()
          .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("grey_dilation", {{"size", 3}}),
                Op("rescale", {{"scale", 1 / 255.0}}), Op("gaussian_blur", {{"ksize", 5}, {"sigma", 1.0}})})
          .Batch(16)
          .Map({Op("random_flip"), Op("random_rotation", {{"degrees", 20.0}})})
          .Prefetch()
          .Seed(7)
          .Build();
  def.mutable_nodes(0)->mutable_source()->set_shuffle_splits(true);
  int64_t last_progress = 0;
  ASSERT_OK_AND_ASSIGN(MaterializeResult r,
                       Materialize(def, dir_.Join("out"), [&](int64_t records) { last_progress = records; }));
  EXPECT_EQ(r.records, 90);
  EXPECT_EQ(last_progress, 90);
  EXPECT_EQ(r.files.size(), 3u);
  EXPECT_THAT(r.ops, ::testing::ElementsAre("parse_example", "grey_dilation", "rescale", "gaussian_blur"));
  const std::string original = Output(def);
  ASSERT_FALSE(original.empty());
  EXPECT_TRUE(Output(r.rewritten) == original) << "the rewritten pipeline's output differs";
  // The pipeline written next to the records is the rewritten one.
  ASSERT_OK_AND_ASSIGN(PipelineDef written, graph::PipelineFromJsonFile(r.pipeline_path));
  EXPECT_TRUE(Output(written) == original);
}

TEST_F(MaterializeTest, APipelineThatStartsRandomHasNothingToMaterialize) {
  PipelineDef def = Source().Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("random_flip")}).Batch(8).Build();
  EXPECT_THAT(Materialize(def, dir_.Join("out"), [](int64_t) {}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("nothing to materialize")));
}

}  // namespace
}  // namespace sluice::profile
