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

// The files, or the error's message.
std::vector<std::string> Names(const std::vector<std::string>& patterns) {
  absl::StatusOr<std::vector<std::string>> files = ExpandFilePatterns(patterns);
  return files.ok() ? *files : std::vector<std::string>{std::string(files.status().message())};
}

TEST(ExpandFilePatterns, BracesExpandInTheirOrderAndEachNameMustExist) {
  testing::TempDir dir;
  for (const char* name : {"s-08.tar", "s-09.tar", "s-10.tar", "v-0.tar", "{a,b}.tar"}) {
    testing::WriteFileBytes(dir.Join(name), "x");
  }
  ASSERT_OK_AND_ASSIGN(auto files, ExpandFilePatterns({dir.Join("{v-0,s-{08..10}}.tar")}));
  EXPECT_THAT(files,
              ElementsAre(dir.Join("v-0.tar"), dir.Join("s-08.tar"), dir.Join("s-09.tar"), dir.Join("s-10.tar")));
  // A file whose name has braces is itself.
  EXPECT_THAT(Names({dir.Join("{a,b}.tar")}), ElementsAre(dir.Join("{a,b}.tar")));
  EXPECT_THAT(ExpandFilePatterns({dir.Join("s-{08..11}.tar")}),
              StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("file not found: '" + dir.Join("s-11.tar")),
                                                          HasSubstr("(from '" + dir.Join("s-{08..11}.tar") + "')"))));
  // A file list's names are taken literally.
  EXPECT_THAT(Names({GlobEscape(dir.Join("{a,b}.tar"))}), ElementsAre(dir.Join("{a,b}.tar")));
}

TEST(ExpandFilePatterns, FileUrlsAreLocalPathsAndPipesAndWebUrlsAreRefusedSayingWhatToDo) {
  testing::TempDir dir;
  testing::WriteFileBytes(dir.Join("a.tar"), "x");
  EXPECT_THAT(Names({"file://" + dir.Join("a.tar")}), ElementsAre(dir.Join("a.tar")));
  EXPECT_THAT(Names({"file:" + dir.Join("*.tar")}), ElementsAre(dir.Join("a.tar")));
  EXPECT_THAT(ExpandFilePatterns({"file://host/a.tar"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a host")));
  EXPECT_THAT(ExpandFilePatterns({"pipe:curl -H 'Authorization: secret' http://h/a.tar"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("not a command's output"), Not(HasSubstr("secret")))));
  EXPECT_THAT(ExpandFilePatterns({"https://h/a.tar"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("download the files first")));
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
