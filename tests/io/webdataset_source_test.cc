// The WebDataset source on real tar shards, written with libarchive's
// writer (ustar); tests/python writes its shards with Python's tarfile.
#include "sluice/io/webdataset_source.h"

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Members = std::vector<std::pair<std::string, std::string>>;  // path, bytes

void WriteTar(const std::string& path, const Members& members) {
  archive* a = archive_write_new();
  archive_write_set_format_ustar(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const auto& [name, bytes] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(bytes.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK);
    ASSERT_EQ(archive_write_data(a, bytes.data(), bytes.size()), static_cast<la_ssize_t>(bytes.size()));
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

// Sample `i` of a shard: a .jpg-named payload, its class, and a .json no field asks for.
Members Samples(int first, int n) {
  Members m;
  for (int i = first; i < first + n; ++i) {
    const std::string key = "dir/sample" + std::to_string(i);
    m.push_back({key + ".jpg", "image bytes of " + std::to_string(i) + std::string(i * 37 % 900, 'x')});
    m.push_back({key + ".cls", std::to_string(i % 7) + "\n"});
    m.push_back({key + ".json", "{\"i\": " + std::to_string(i) + "}"});
  }
  return m;
}

struct Rows {
  std::vector<std::string> images;
  std::vector<int64_t> labels;
};

// Every split of `format`, in order; the first error, or the rows.
absl::StatusOr<Rows> ReadAll(const SourceFormat& format, CorruptionLog* skip_log = nullptr) {
  Rows rows;
  for (const Split& split : format.MakeSplits()) {
    absl::StatusOr<std::unique_ptr<SplitReader>> reader = format.OpenSplit(split, skip_log);
    if (!reader.ok()) return reader.status();
    while (true) {
      BatchBuilder b(format.schema(), 4);  // small batches: samples span Read calls
      absl::StatusOr<int64_t> n = (*reader)->Read(4, &b);
      if (!n.ok()) return n.status();
      if (*n == 0) break;
      Batch batch = b.Finish();
      for (int64_t r = 0; r < batch.rows; ++r) {
        rows.images.emplace_back(batch.columns[0].RaggedRow(r));
        rows.labels.push_back(batch.columns[1].values.data<int64_t>()[r]);
      }
    }
  }
  return rows;
}

class WebDatasetTest : public ::testing::Test {
 protected:
  std::string Shard(const std::string& name, const Members& members) {
    const std::string path = dir_.Join(name);
    WriteTar(path, members);
    return path;
  }
  sluice::testing::TempDir dir_;
};

TEST_F(WebDatasetTest, ReadsSamplesByKeyAcrossShardsInOrder) {
  Shard("train-000.tar", Samples(0, 5));
  Shard("train-001.tar", Samples(5, 6));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SourceFormat> format, MakeWebDatasetSource({dir_.Join("train-*.tar")}, {}));
  EXPECT_EQ(format->schema().ToString(), "{image: bytes, label: int64[]}");
  EXPECT_EQ(format->MakeSplits().size(), 2u);
  ASSERT_OK_AND_ASSIGN(Rows rows, ReadAll(*format));
  ASSERT_EQ(rows.images.size(), 11u);
  for (int i = 0; i < 11; ++i) {
    EXPECT_EQ(rows.images[i], "image bytes of " + std::to_string(i) + std::string(i * 37 % 900, 'x'));
    EXPECT_EQ(rows.labels[i], i % 7);
  }
}

TEST_F(WebDatasetTest, DeclaredFieldsTakeAnyOfTheirExtensions) {
  Shard("a.tar", {{"k1.PNG", "p1"},
                  {"k1.meta.json", "{1}"},
                  {"k1.idx", " 41 "},
                  {"k2.jpeg", "j2"},
                  {"k2.meta.json", "{2}"},
                  {"k2.idx", "42"}});
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<SourceFormat> format,
      MakeWebDatasetSource({dir_.Join("a.tar")},
                           {{"img", {"png", "jpeg"}, false}, {"n", {".idx"}, true}, {"meta", {"meta.json"}, false}}));
  ASSERT_OK_AND_ASSIGN(Rows rows, ReadAll(*format));
  EXPECT_EQ(rows.images, (std::vector<std::string>{"p1", "j2"}));
  EXPECT_EQ(rows.labels, (std::vector<int64_t>{41, 42}));
}

TEST_F(WebDatasetTest, ASampleLackingAFieldIsAnErrorOrACountedSkip) {
  Members m = Samples(0, 4);
  m.erase(m.begin() + 4);  // sample1.cls
  const std::string shard = Shard("s.tar", m);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SourceFormat> format, MakeWebDatasetSource({shard}, {}));
  EXPECT_THAT(ReadAll(*format).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("sample 'dir/sample1'"), HasSubstr(shard),
                             HasSubstr("has no member for field 'label' (extensions cls); its members' extensions: "
                                       "jpg, json"))));
  CorruptionLog log;
  ASSERT_OK_AND_ASSIGN(Rows rows, ReadAll(*format, &log));
  EXPECT_EQ(rows.labels, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(log.skipped(), 1);
}

TEST_F(WebDatasetTest, AClassThatIsNoIntegerOrATwiceGivenFieldNamesTheMember) {
  const std::string bad = Shard("bad.tar", {{"k.jpg", "x"}, {"k.cls", "cat"}});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SourceFormat> format, MakeWebDatasetSource({bad}, {}));
  EXPECT_THAT(ReadAll(*format).status(),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("k.cls"), HasSubstr("\"cat\""), HasSubstr(bad))));
  const std::string twice = Shard("twice.tar", {{"k.jpg", "x"}, {"k.png", "y"}, {"k.cls", "1"}});
  ASSERT_OK_AND_ASSIGN(format, MakeWebDatasetSource({twice}, {}));
  EXPECT_THAT(ReadAll(*format).status(),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("second member"), HasSubstr("k.png"))));
}

TEST_F(WebDatasetTest, ATruncatedShardNamesItselfAndKeepsWhatCameBefore) {
  const std::string shard = Shard("cut.tar", Samples(0, 6));
  const auto size = std::filesystem::file_size(shard);
  std::filesystem::resize_file(shard, size / 2 + 100);  // mid-member
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SourceFormat> format, MakeWebDatasetSource({shard}, {}));
  EXPECT_THAT(ReadAll(*format).status(),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("truncated or damaged"), HasSubstr(shard))));
  CorruptionLog log;
  ASSERT_OK_AND_ASSIGN(Rows rows, ReadAll(*format, &log));
  EXPECT_GE(rows.labels.size(), 1u);
  EXPECT_LT(rows.labels.size(), 6u);
  for (size_t i = 0; i < rows.labels.size(); ++i) EXPECT_EQ(rows.labels[i], static_cast<int64_t>(i % 7));
  EXPECT_EQ(log.skipped(), 1);
}

// Where member `m`'s 512-byte ustar header starts in a shard of `members`.
std::uintmax_t HeaderOffset(const Members& members, size_t m) {
  std::uintmax_t offset = 0;
  for (size_t i = 0; i < m; ++i) offset += 512 + (members[i].second.size() + 511) / 512 * 512;
  return offset;
}

// A cut inside a header, or a header whose checksum fails (which
// libarchive would skip past, losing its member): the shard ends there,
// named, and every whole sample before it is kept.
TEST_F(WebDatasetTest, ADamagedOrCutHeaderEndsTheShardKeepingTheWholeSamplesBefore) {
  const Members members = Samples(0, 6);
  const std::uintmax_t sample3 = HeaderOffset(members, 9);  // 3 members a sample
  for (const bool cut : {true, false}) {
    const std::string shard = Shard(cut ? "cut.tar" : "flipped.tar", members);
    if (cut) {
      std::filesystem::resize_file(shard, sample3 + 200);
    } else {
      std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(sample3 + 1));
      f.put('#');  // the name's second byte: the header's checksum fails
    }
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<SourceFormat> format, MakeWebDatasetSource({shard}, {}));
    EXPECT_THAT(ReadAll(*format).status(),
                StatusIs(absl::StatusCode::kDataLoss,
                         AllOf(HasSubstr("truncated or damaged after member dir/sample2.json"), HasSubstr(shard))))
        << shard;
    CorruptionLog log;
    ASSERT_OK_AND_ASSIGN(Rows rows, ReadAll(*format, &log));
    EXPECT_THAT(rows.labels, ::testing::ElementsAre(0, 1, 2)) << shard;
    EXPECT_EQ(log.skipped(), 1);
  }
}

// A file with no tar in it (empty, another format) is DataLoss naming it,
// or under skip is skipped whole and counted, the shards around it read.
TEST_F(WebDatasetTest, AFileThatIsNoTarIsNamedOrSkippedWholeKeepingTheOthers) {
  Shard("a-0.tar", Samples(0, 3));
  testing::WriteFileBytes(dir_.Join("a-1.tar"), "this is not a tar archive at all, just text");
  testing::WriteFileBytes(dir_.Join("a-2.tar"), "");
  Shard("a-3.tar", Samples(3, 2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SourceFormat> format, MakeWebDatasetSource({dir_.Join("a-*.tar")}, {}));
  EXPECT_THAT(ReadAll(*format).status(),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr(dir_.Join("a-1.tar")), HasSubstr("archive"))));
  CorruptionLog log;
  ASSERT_OK_AND_ASSIGN(Rows rows, ReadAll(*format, &log));
  EXPECT_EQ(rows.labels, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(log.skipped(), 2);
}

// Members named without an extension or without a key belong to no sample
// (the webdataset library passes over them), wherever they lie.
TEST_F(WebDatasetTest, MembersWithoutKeyOrExtensionArePassedOver) {
  Members m = Samples(0, 3);
  m.insert(m.begin() + 1, {"README", "hello"});
  m.insert(m.begin() + 4, {"dir/.DS_Store", "finder"});
  m.push_back({"LICENSE", "text"});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SourceFormat> format, MakeWebDatasetSource({Shard("m.tar", m)}, {}));
  ASSERT_OK_AND_ASSIGN(Rows rows, ReadAll(*format));
  EXPECT_EQ(rows.labels, (std::vector<int64_t>{0, 1, 2}));
}

TEST_F(WebDatasetTest, AFieldOfDeclaredLengthIsDenseAndAMemberOfAnotherLengthIsNamed) {
  const std::string shard = Shard("d.tar", {{"k0.bin", "abcd"}, {"k0.cls", "0"}, {"k1.bin", "abc"}, {"k1.cls", "1"}});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SourceFormat> format,
                       MakeWebDatasetSource({shard}, {{"raw", {"bin"}, false, 4}, {"label", {"cls"}, true}}));
  EXPECT_EQ(format->schema().ToString(), "{raw: uint8[4], label: int64[]}");
  BatchBuilder b(format->schema(), 4);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SplitReader> reader, format->OpenSplit(format->MakeSplits()[0], nullptr));
  EXPECT_THAT(
      reader->Read(4, &b).status(),
      StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("k1.bin"), HasSubstr("3 bytes, not the declared 4"))));
  EXPECT_EQ(b.rows(), 1);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.dense(0)), 4), "abcd");
}

TEST_F(WebDatasetTest, BadDeclarationsAndMissingShardsAreNamed) {
  Shard("x.tar", Samples(0, 1));
  EXPECT_THAT(
      MakeWebDatasetSource({dir_.Join("x.tar")}, {{"a", {"jpg"}, false}, {"b", {"JPG"}, false}}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("'jpg'"), HasSubstr("'a'"), HasSubstr("'b'"))));
  EXPECT_THAT(MakeWebDatasetSource({dir_.Join("x.tar")}, {{"a", {}, false}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("extensions")));
  EXPECT_THAT(MakeWebDatasetSource({dir_.Join("none-*.tar")}, {}).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none-*.tar")));
}

}  // namespace
}  // namespace sluice::io
