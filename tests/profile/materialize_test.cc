#include "sluice/profile/materialize.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/graph/fingerprint.h"
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
  // The parse is not among them: the rewritten pipeline parses its records too.
  EXPECT_THAT(r.ops, ::testing::ElementsAre("grey_dilation", "rescale", "gaussian_blur"));
  const std::string original = Output(def);
  ASSERT_FALSE(original.empty());
  EXPECT_TRUE(Output(r.rewritten) == original) << "the rewritten pipeline's output differs";
  // The pipeline written next to the records is the rewritten one.
  ASSERT_OK_AND_ASSIGN(PipelineDef written, graph::PipelineFromJsonFile(r.pipeline_path));
  EXPECT_TRUE(Output(written) == original);
}

// Every column's bytes of the rest of epoch 1 from `state`.
std::string Rest(const PipelineDef& def, const std::string& state) {
  absl::StatusOr<std::unique_ptr<exec::Pipeline>> p = exec::Pipeline::Create(def);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return "";
  absl::StatusOr<std::unique_ptr<exec::PipelineIterator>> it = (*p)->Resume(state);
  EXPECT_TRUE(it.ok()) << it.status();
  if (!it.ok()) return "";
  std::string out;
  while (true) {
    Batch b;
    bool end = false;
    EXPECT_TRUE((*it)->Next(&b, &end).ok());
    if (end) break;
    for (const Column& c : b.columns)
      out.append(reinterpret_cast<const char*>(c.values.raw_data()), c.values.byte_size());
  }
  return out;
}

TEST_F(MaterializeTest, AStateRestoresInTheOriginalAndTheRewrittenAlike) {
  PipelineDef def = Source()
                        .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("grey_dilation", {{"size", 3}})})
                        .Shuffle(40)
                        .Batch(10)
                        .Map({Op("random_flip")})
                        .Seed(3)
                        .Build();
  def.mutable_nodes(0)->mutable_source()->set_shuffle_splits(true);
  def.mutable_nodes(0)->mutable_source()->set_split_records(10);
  ASSERT_OK_AND_ASSIGN(MaterializeResult r, Materialize(def, dir_.Join("out"), [](int64_t) {}));
  EXPECT_EQ(graph::OutputFingerprint(r.rewritten), graph::OutputFingerprint(def));
  EXPECT_TRUE(Output(r.rewritten) == Output(def)) << "the rewritten pipeline's output differs";
  // Three batches into epoch 1 of the original, its state; the rest of the
  // epoch from it, in either pipeline.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> original, exec::Pipeline::Create(def));
  std::unique_ptr<exec::PipelineIterator> it = original->Iterate(1);
  for (int i = 0; i < 3; ++i) {
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&b, &end));
  }
  ASSERT_OK_AND_ASSIGN(std::string state, it->SaveState());
  const std::string rest = Rest(def, state);
  ASSERT_FALSE(rest.empty());
  EXPECT_TRUE(Rest(r.rewritten, state) == rest) << "the rewritten pipeline resumed elsewhere";
  // Edited, the rewritten pipeline is one of its own: another's state is
  // refused.
  PipelineDef edited = r.rewritten;
  edited.mutable_nodes()->rbegin()->mutable_map()->mutable_ops(0)->set_op("random_erasing");
  EXPECT_NE(graph::OutputFingerprint(edited), graph::OutputFingerprint(def));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> other, exec::Pipeline::Create(edited));
  EXPECT_THAT(other->Resume(state).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the state is another pipeline's")));
}

TEST_F(MaterializeTest, APipelineThatStartsRandomHasNothingToMaterialize) {
  PipelineDef def = Source().Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("random_flip")}).Batch(8).Build();
  EXPECT_THAT(Materialize(def, dir_.Join("out"), [](int64_t) {}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("nothing to materialize")));
}

}  // namespace
}  // namespace sluice::profile
