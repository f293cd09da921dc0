#include "sluice/io/image_files.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The smallest bytes the source's framing check accepts as a JPEG.
const std::string kJpeg = std::string("\xff\xd8\xff\xe0 some bytes \xff\xd9", 18);

class ImageFilesTest : public ::testing::Test {
 protected:
  void Put(const std::string& rel, const std::string& bytes = kJpeg) {
    const std::string path = dir_.Join(rel);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    testing::WriteFileBytes(path, bytes);
  }

  // Every row's (label, path) in split order.
  static std::vector<std::pair<int64_t, std::string>> Rows(const SourceFormat& source, CorruptionLog* log = nullptr) {
    std::vector<std::pair<int64_t, std::string>> rows;
    for (const Split& split : source.MakeSplits()) {
      auto reader = source.OpenSplit(split, log);
      BatchBuilder b(source.schema(), 4);
      absl::StatusOr<int64_t> n = (*reader)->Read(4, &b);
      EXPECT_TRUE(n.ok()) << n.status();
      Batch batch = b.Finish();
      for (int64_t r = 0; r < batch.rows; ++r) {
        rows.emplace_back(batch.columns[1].values.data<int64_t>()[r],
                          (*source.files())[batch.provenance.Origin(r).file]);
      }
    }
    return rows;
  }

  testing::TempDir dir_;
};

TEST_F(ImageFilesTest, SortedClassFoldersAreTheLabels) {
  Put("root/zebra/1.jpg");
  Put("root/ant/b.JPEG");
  Put("root/ant/deeper/a.png", std::string("\x89PNG\r\n\x1a\n....IEND\xae\x42\x60\x82", 20));
  Put("root/ant/notes.txt", "not an image");
  Put("root/mole/c.Jpg");
  ASSERT_OK_AND_ASSIGN(auto source, MakeImageFolderSource(dir_.Join("root")));
  EXPECT_THAT(Rows(*source), ElementsAre(std::make_pair(0, dir_.Join("root/ant/b.JPEG")),
                                         std::make_pair(0, dir_.Join("root/ant/deeper/a.png")),
                                         std::make_pair(1, dir_.Join("root/mole/c.Jpg")),
                                         std::make_pair(2, dir_.Join("root/zebra/1.jpg"))));
}

// torchvision's ImageFolder order within a class: its folders by path,
// each one's files by name (sorting whole paths put "a/1" before "b" and
// "sub-2/y" before "sub/x").
TEST_F(ImageFilesTest, AClassesFilesComeInImageFoldersOrder) {
  for (const char* rel : {"root/cls/z.jpg", "root/cls/b.jpg", "root/cls/a/1.jpg", "root/cls/sub/x.jpg",
                          "root/cls/sub-2/y.jpg", "root/cls/sub/deeper/w.jpg"}) {
    Put(rel);
  }
  ASSERT_OK_AND_ASSIGN(auto source, MakeImageFolderSource(dir_.Join("root")));
  std::vector<std::string> order;
  for (const auto& [label, path] : Rows(*source)) order.push_back(path.substr(dir_.Join("root/cls/").size()));
  // Python: [f for root, _, files in sorted(os.walk("root/cls")) for f in sorted(files)]
  EXPECT_THAT(order, ElementsAre("b.jpg", "z.jpg", "a/1.jpg", "sub/x.jpg", "sub-2/y.jpg", "sub/deeper/w.jpg"));
}

TEST_F(ImageFilesTest, AFileListNamesFilesRelativeToItself) {
  Put("imgs/x.jpg");
  Put("imgs/y.jpg");
  testing::WriteFileBytes(dir_.Join("list.txt"), "# path label\nimgs/y.jpg 7\n\nimgs/x.jpg 3  # comment\n");
  ASSERT_OK_AND_ASSIGN(auto source, MakeFileListSource(dir_.Join("list.txt")));
  EXPECT_THAT(Rows(*source),
              ElementsAre(std::make_pair(7, dir_.Join("imgs/y.jpg")), std::make_pair(3, dir_.Join("imgs/x.jpg"))));
  testing::WriteFileBytes(dir_.Join("bad.txt"), "imgs/x.jpg 3\nimgs/y.jpg seven\n");
  EXPECT_THAT(MakeFileListSource(dir_.Join("bad.txt")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad.txt line 2: expected \"<path> <label>\"")));
}

// A '#' inside a name is the name's (it cut "take#2.jpg" to "take"); a
// BOM before the first line is no path's.
TEST_F(ImageFilesTest, AFileListsCommentStartsAtAHashAfterASpaceAndABomIsNoPath) {
  Put("imgs/take#2.jpg");
  Put("imgs/x.jpg");
  testing::WriteFileBytes(dir_.Join("list.txt"), "\xEF\xBB\xBFimgs/take#2.jpg 1 #the second take\n#imgs/x.jpg 4\n");
  ASSERT_OK_AND_ASSIGN(auto source, MakeFileListSource(dir_.Join("list.txt")));
  EXPECT_THAT(Rows(*source), ElementsAre(std::make_pair(1, dir_.Join("imgs/take#2.jpg"))));
}

TEST_F(ImageFilesTest, TruncatedImagesAreDataLossOrCountedUnderTheSkipPolicy) {
  Put("root/a/good.jpg");
  Put("root/a/truncated.jpg", kJpeg.substr(0, 12));
  Put("root/b/fake.png", "\x89PNG but not really");
  ASSERT_OK_AND_ASSIGN(auto source, MakeImageFolderSource(dir_.Join("root")));
  auto reader = source->OpenSplit(source->MakeSplits()[1], nullptr);
  BatchBuilder b(source->schema(), 4);
  EXPECT_THAT((*reader)->Read(4, &b),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("truncated JPEG (no end-of-image marker) in " + dir_.Join("root/a/truncated.jpg"))));
  CorruptionLog skipped;
  EXPECT_EQ(Rows(*source, &skipped).size(), 1u);
  EXPECT_EQ(skipped.skipped(), 2);
  EXPECT_THAT(skipped.Summary(), HasSubstr("fake.png"));
}

TEST_F(ImageFilesTest, AMissingOrEmptyRootIsNotFound) {
  EXPECT_THAT(MakeImageFolderSource(dir_.Join("nothing")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("is not a directory")));
  Put("empty/cls/readme.md", "#");
  EXPECT_THAT(MakeImageFolderSource(dir_.Join("empty")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("holds no .jpg, .jpeg, .png or .webp files")));
}

TEST_F(ImageFilesTest, ReadingAFolderGivesEachImagesBytesInTheSourcesOrder) {
  const std::string other = std::string("\xff\xd8\xff\xe1 other bytes \xff\xd9", 19);
  Put("root/b/x.jpg", kJpeg);
  Put("root/a/y.jpeg", other);
  Put("root/a/skip.txt", "not an image");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> images, ReadImageFolder(dir_.Join("root")));
  EXPECT_THAT(images, ElementsAre(other, kJpeg));
  EXPECT_THAT(ReadImageFolder(dir_.Join("nothing")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("is not a directory")));
}

}  // namespace
}  // namespace sluice::io
