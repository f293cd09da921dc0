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
