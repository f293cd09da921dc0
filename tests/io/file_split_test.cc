#include "sluice/io/file_split.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ExpandFilePatterns, ExpandsGlobsSortedInPatternOrder) {
  testing::TempDir dir;
  for (const char* name : {"b.rec", "a.rec", "c.txt"}) testing::WriteFileBytes(dir.Join(name), "x");
  ASSERT_OK_AND_ASSIGN(auto files, ExpandFilePatterns({dir.Join("c.txt"), dir.Join("*.rec")}));
  EXPECT_THAT(files, ElementsAre(dir.Join("c.txt"), dir.Join("a.rec"), dir.Join("b.rec")));
}

TEST(ExpandFilePatterns, AFolderGlobTakesTheFilesNotTheirIndexesBesideThem) {
  testing::TempDir dir;
  for (const char* name : {"a.tfrecord", "a.tfrecord.index", "b.tfrecord", "orphan.index"}) {
    testing::WriteFileBytes(dir.Join(name), "x");
  }
  ASSERT_OK_AND_ASSIGN(auto files, ExpandFilePatterns({dir.Join("*")}));
  // An .index without its file beside it is no index of sluice's: kept.
  EXPECT_THAT(files, ElementsAre(dir.Join("a.tfrecord"), dir.Join("b.tfrecord"), dir.Join("orphan.index")));
}

TEST(ExpandFilePatterns, PatternMatchingNothingIsNotFoundNamingIt) {
  testing::TempDir dir;
  EXPECT_THAT(
      ExpandFilePatterns({dir.Join("*.tfrecord")}),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("no file matches pattern '" + dir.Join("*.tfrecord") + "'")));
  EXPECT_THAT(ExpandFilePatterns({dir.Join("missing.tfrecord")}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing.tfrecord")));
  // A pattern under a folder that does not exist names the folder.
  EXPECT_THAT(ExpandFilePatterns({dir.Join("gone/*.tfrecord")}),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("no file matches pattern"),
                                                          HasSubstr("cannot read folder " + dir.Join("gone")))));
}

TEST(ExpandFilePatterns, APathLikeAMistypedObjectUrlSaysHowToWriteOne) {
  const auto hint = [](const std::string& scheme) {
    return HasSubstr("(an object's URL is written " + scheme + "//bucket/key)");
  };
  EXPECT_THAT(ExpandFilePatterns({"s3:/bucket/train-0.tfrecord"}),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("file not found: 's3:/bucket/train-0.tfrecord'"), hint("s3:"))));
  EXPECT_THAT(ExpandFilePatterns({"gs:bucket/*.tfrecord"}), StatusIs(absl::StatusCode::kNotFound, hint("gs:")));
  EXPECT_THAT(ExpandFilePatterns({"s3:/bucket/*.tfrecord"}), StatusIs(absl::StatusCode::kNotFound, hint("s3:")));
  testing::TempDir dir;
  EXPECT_THAT(ExpandFilePatterns({dir.Join("s3:/missing.tfrecord")}),
              StatusIs(absl::StatusCode::kNotFound, Not(HasSubstr("an object's URL"))));
}

TEST(MakeRecordSplits, CutsFilesIntoRanges) {
  const std::vector<Split> s = MakeRecordSplits({5, 2}, 2);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].begin_record, 0);
  EXPECT_EQ(s[2].begin_record, 4);
  EXPECT_EQ(s[2].end_record, 5);
  EXPECT_EQ(s[3].file, 1);
  EXPECT_EQ(MakeRecordSplits({5, 2}, 0).size(), 2u);
}

}  // namespace
}  // namespace sluice::io
