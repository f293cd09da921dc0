// Pinning resolves a source's patterns once into the definition; the
// pinned list is what is read even when the folder changes.
#include "sluice/graph/pin_files.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::graph {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

TEST(PinFiles, APatternBecomesTheFilesItMatchesNow) {
  sluice::testing::TempDir dir;
  const std::vector<std::string> files = sluice::testing::WriteCifarTfRecords(dir.path(), 20, 2);
  PipelineDef def = PipelineBuilder::TfRecord({dir.Join("*.tfrecord")}, {BytesFeature("image", 3072)}).Build();
  SLUICE_ASSERT_OK(PinFiles(&def));
  const PinnedFiles& pinned = def.nodes(0).source().pinned();
  ASSERT_EQ(pinned.files_size(), 2);
  EXPECT_EQ(pinned.files(0), files[0]);
  // A file added later is not read: the pinned list is.
  std::filesystem::copy_file(files[0], dir.Join("zz-later.tfrecord"));
  ASSERT_OK_AND_ASSIGN(const CompiledPipeline plan, Compile(def));
  EXPECT_EQ(plan.nodes[0].format->files()->size(), 2u);
}

TEST(PinFiles, APatternMatchingNothingIsNotFoundNamingIt) {
  sluice::testing::TempDir dir;
  PipelineDef def = PipelineBuilder::TfRecord({dir.Join("none-*.tfrecord")}, {BytesFeature("image", 3072)}).Build();
  EXPECT_THAT(PinFiles(&def), StatusIs(absl::StatusCode::kNotFound, HasSubstr("none-*.tfrecord")));
}

TEST(PinFiles, SourcesThatListNothingAreLeftAlone) {
  PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("x", {1}, std::vector<float>{1, 2})}).Build();
  const PipelineDef before = def;
  SLUICE_ASSERT_OK(PinFiles(&def));
  EXPECT_EQ(def.SerializeAsString(), before.SerializeAsString());
}

}  // namespace
}  // namespace sluice::graph
