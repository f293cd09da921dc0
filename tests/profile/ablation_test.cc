#include "sluice/profile/ablation.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::profile {
namespace {

using ::sluice::testing::StatusIs;

class AblationTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::WriteCifarTfRecords(dir_.path(), 40, 2); }

  PipelineDef Def(std::vector<OpSpec> ops) {
    std::vector<OpSpec> chain = {Op("reshape", {{"shape", {32, 32, 3}}}), Op("rescale", {{"scale", 1 / 255.0}})};
    chain.insert(chain.end(), ops.begin(), ops.end());
    return PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", 3072)})
        .Map(chain)
        .Batch(8)
        .Build();
  }

  // Every batch's image bytes, concatenated.
  static std::string Output(graph::CompiledPipeline compiled) {
    absl::StatusOr<std::unique_ptr<exec::Pipeline>> p = exec::Pipeline::FromCompiled(std::move(compiled));
    EXPECT_TRUE(p.ok()) << p.status();
    auto it = (*p)->Iterate();
    std::string out;
    while (true) {
      Batch b;
      bool end = false;
      EXPECT_TRUE(it->Next(&b, &end).ok());
      if (end) break;
      const Tensor& t = b.columns[0].values;
      out.append(reinterpret_cast<const char*>(t.raw_data()), t.byte_size());
    }
    return out;
  }

  testing::TempDir dir_;
};

TEST_F(AblationTest, AblatingANoOpChangesNothing) {
  const PipelineDef def = Def({Op("rescale", {{"scale", 1.0}})});
  ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline compiled, graph::Compile(def));
  graph::CompiledPipeline ablated = compiled;
  SLUICE_ASSERT_OK(AblateOp(&ablated, 1, 3));  // parse, reshape, rescale 1/255, rescale 1
  const std::string original = Output(compiled);
  EXPECT_FALSE(original.empty());
  EXPECT_EQ(Output(ablated), original);
}

TEST_F(AblationTest, AnAblatedOpThatKeepsTheSpecPassesItsInputThrough) {
  ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline blurred,
                       graph::Compile(Def({Op("gaussian_blur", {{"ksize", 5}, {"sigma", 1.0}})})));
  ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline plain, graph::Compile(Def({})));
  SLUICE_ASSERT_OK(AblateOp(&blurred, 1, 3));
  EXPECT_EQ(Output(blurred), Output(plain));
}

TEST_F(AblationTest, AnAblatedOpThatChangesTheDtypeWritesZerosOfTheRightShape) {
  ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline compiled, graph::Compile(Def({})));
  SLUICE_ASSERT_OK(AblateOp(&compiled, 1, 2));  // rescale: uint8 in, float32 out
  const std::string out = Output(compiled);
  EXPECT_EQ(out.size(), 40u * 3072 * sizeof(float));
  EXPECT_EQ(out, std::string(out.size(), '\0'));
}

TEST_F(AblationTest, ThereMustBeSuchAnOp) {
  ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline compiled, graph::Compile(Def({})));
  EXPECT_THAT(AblateOp(&compiled, 2, 0),  // the batch node
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("no op 0 in a map node 2")));
  EXPECT_THAT(AblateOp(&compiled, 1, 9), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("no op 9")));
}

}  // namespace
}  // namespace sluice::profile
