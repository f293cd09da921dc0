#include "sluice/io/path_pattern.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/io/file_split.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Each expected list is bash's `echo` of the same words.
TEST(ExpandBraces, ExpandsAsBashInOrder) {
  const auto names = [](const std::string& p) { return ExpandBraces(p).value(); };
  EXPECT_THAT(names("s-{000..003}.tar"), ElementsAre("s-000.tar", "s-001.tar", "s-002.tar", "s-003.tar"));
  EXPECT_THAT(names("s-{8..11}.tar"), ElementsAre("s-8.tar", "s-9.tar", "s-10.tar", "s-11.tar"));
  EXPECT_THAT(names("s{9..011}"), ElementsAre("s009", "s010", "s011"));
  EXPECT_THAT(names("{3..1}"), ElementsAre("3", "2", "1"));
  EXPECT_THAT(names("{0..10..5}"), ElementsAre("0", "5", "10"));
  EXPECT_THAT(names("{-1..1}"), ElementsAre("-1", "0", "1"));
  EXPECT_THAT(names("{a..c}"), ElementsAre("a", "b", "c"));
  EXPECT_THAT(names("{train,val}-{0..1}.tar"), ElementsAre("train-0.tar", "train-1.tar", "val-0.tar", "val-1.tar"));
  EXPECT_THAT(names("x{a,{b,c}d}y"), ElementsAre("xay", "xbdy", "xcdy"));
  EXPECT_THAT(names("{,pre}fix"), ElementsAre("fix", "prefix"));
  // No expression: as it is.
  EXPECT_THAT(names("{x}.tar"), ElementsAre("{x}.tar"));
  EXPECT_THAT(names("{1..x}"), ElementsAre("{1..x}"));
  EXPECT_THAT(names("a{b"), ElementsAre("a{b"));
  EXPECT_THAT(names("a{b{1..2}"), ElementsAre("a{b1", "a{b2"));
  EXPECT_THAT(names("{1..3..0}"), ElementsAre("1", "2", "3"));
  EXPECT_THAT(names("f{ 1..2}"), ElementsAre("f{ 1..2}"));
  EXPECT_THAT(names("f{+1..2}"), ElementsAre("f1", "f2"));
  EXPECT_THAT(names("{+01..2}"), ElementsAre("1", "2"));
  EXPECT_THAT(names("{-01..1}"), ElementsAre("-01", "000", "001"));
  EXPECT_THAT(names("{0..9999999999999999999}"), ElementsAre("{0..9999999999999999999}"));
  EXPECT_THAT(names("\\{a,b}"), ElementsAre("\\{a,b}"));
  EXPECT_THAT(ExpandBraces("{0..9999999}"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("10000000 names")));
  EXPECT_THAT(ExpandBraces("{0..999}{0..9999}"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than")));
}

TEST(PathPatternTest, TwoStarsStandForAnyNumberOfFoldersNoneIncluded) {
  EXPECT_TRUE(PathMatches("d/**/*.parquet", "d/a.parquet"));
  EXPECT_TRUE(PathMatches("d/**/*.parquet", "d/x/a.parquet"));
  EXPECT_TRUE(PathMatches("d/**/*.parquet", "d/x/y/z/a.parquet"));
  EXPECT_FALSE(PathMatches("d/**/*.parquet", "d/x/a.tfrecord"));
  EXPECT_FALSE(PathMatches("d/**/*.parquet", "e/x/a.parquet"));
  EXPECT_TRUE(PathMatches("d/**", "d/x/y"));
  EXPECT_TRUE(PathMatches("d/**/x/*", "d/x/a"));
  EXPECT_TRUE(PathMatches("d/**/x/*", "d/p/q/x/a"));
  EXPECT_FALSE(PathMatches("d/**/x/*", "d/p/q/x"));
  // One star stays within a folder; escapes stay escapes.
  EXPECT_FALSE(PathMatches("d/*/a", "d/x/y/a"));
  EXPECT_TRUE(PathMatches("d/**/\\*.bin", "d/x/*.bin"));
  EXPECT_FALSE(PathMatches("d/**/\\*.bin", "d/x/y.bin"));
  // Hidden names only by a pattern that starts with a dot, as glob(3).
  EXPECT_FALSE(PathMatches("d/**/*.parquet", "d/.x.parquet"));
  EXPECT_FALSE(PathMatches("d/**/*.parquet", "d/.ipynb_checkpoints/a.parquet"));
  EXPECT_TRUE(PathMatches("d/**/.*.parquet", "d/x/.a.parquet"));
  EXPECT_TRUE(HasRecursiveWildcard("/data/**/*.tar"));
  EXPECT_FALSE(HasRecursiveWildcard("/data/a**b/*.tar"));
}

// glob(3) took `**` for `*`: the files above and below one folder were
// missed, in silence.
TEST(PathPatternTest, ALocalPatternWithTwoStarsFindsTheFilesAtEveryDepth) {
  testing::TempDir dir;
  for (const char* name :
       {"a.parquet", "x/b.parquet", "x/y/c.parquet", "x/y/d.txt", "z/w/v/e.parquet", "x/.hidden/f.parquet"}) {
    std::filesystem::create_directories(std::filesystem::path(dir.Join(name)).parent_path());
    std::ofstream(dir.Join(name)) << "x";
  }
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> files, ExpandFilePatterns({dir.Join("**/*.parquet")}));
  EXPECT_THAT(files, ElementsAre(dir.Join("a.parquet"), dir.Join("x/b.parquet"), dir.Join("x/y/c.parquet"),
                                 dir.Join("z/w/v/e.parquet")));
  ASSERT_OK_AND_ASSIGN(files, ExpandFilePatterns({dir.Join("x/**")}));
  EXPECT_THAT(files, ElementsAre(dir.Join("x/b.parquet"), dir.Join("x/y/c.parquet"), dir.Join("x/y/d.txt")));
  EXPECT_THAT(ExpandFilePatterns({dir.Join("**/*.tar")}),
              StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("no file matches pattern")));
  // From the current folder, named as it would name them.
  const std::filesystem::path here = std::filesystem::current_path();
  std::filesystem::current_path(dir.Join("x"));
  const absl::StatusOr<std::vector<std::string>> relative = ExpandFilePatterns({"**/*.parquet"});
  std::filesystem::current_path(here);
  SLUICE_ASSERT_OK(relative.status());
  EXPECT_THAT(*relative, ElementsAre("b.parquet", "y/c.parquet"));
  EXPECT_THAT(ExpandFilePatterns({dir.Join("nowhere/**/*.tar")}),
              StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("nowhere")));
}

}  // namespace
}  // namespace sluice::io
