#include "sluice/io/tfrecord_index.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/io/crc32c.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

TEST(TfRecordIndex, RoundTripsRecordOffsets) {
  testing::TempDir dir;
  const std::string path = dir.Join("a.tfrecord");
  testing::WriteTfRecords(path, {"x", "yy", "zzz"});
  ASSERT_OK_AND_ASSIGN(std::optional<std::vector<uint64_t>> none, ReadTfRecordIndex(path));
  EXPECT_FALSE(none.has_value());
  ASSERT_OK_AND_ASSIGN(int64_t n, WriteTfRecordIndex(path));
  EXPECT_EQ(n, 3);
  ASSERT_OK_AND_ASSIGN(std::optional<std::vector<uint64_t>> offsets, ReadTfRecordIndex(path));
  ASSERT_TRUE(offsets.has_value());
  EXPECT_THAT(*offsets, ::testing::ElementsAre(0u, 17u, 35u));  // 16 bytes of framing each
}

TEST(TfRecordIndex, StaleIndexIsRejected) {
  testing::TempDir dir;
  const std::string path = dir.Join("a.tfrecord");
  testing::WriteTfRecords(path, {"x", "yy"});
  ASSERT_TRUE(WriteTfRecordIndex(path).ok());
  testing::WriteTfRecords(path, {"x", "yy", "zzz"});
  EXPECT_THAT(ReadTfRecordIndex(path), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("stale index")));
}

TEST(TfRecordIndex, CorruptIndexIsDataLoss) {
  testing::TempDir dir;
  const std::string path = dir.Join("a.tfrecord");
  testing::WriteTfRecords(path, {"x", "yy"});
  ASSERT_TRUE(WriteTfRecordIndex(path).ok());
  testing::IncrementByte(TfRecordIndexPath(path), 33);
  EXPECT_THAT(ReadTfRecordIndex(path), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("crc mismatch")));
}

// An index whose CRC checks but whose fields lie (written by another tool or
// forged) is refused before anything is allocated from them.
class ForgedIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Join("a.tfrecord");
    testing::WriteTfRecords(path_, {"x", "yy", "zzz"});
    ASSERT_TRUE(WriteTfRecordIndex(path_).ok());
    std::ifstream in(TfRecordIndexPath(path_), std::ios::binary);
    index_.assign(std::istreambuf_iterator<char>(in), {});
    ASSERT_EQ(index_.size(), 32u + 3 * 8 + 4);
  }

  // Rewrites the index with the u64 at `at` set to `value` and a fresh CRC.
  void Forge(size_t at, uint64_t value) {
    std::memcpy(index_.data() + at, &value, 8);
    const uint32_t crc = MaskCrc(Crc32c(index_.data(), index_.size() - 4));
    std::memcpy(index_.data() + index_.size() - 4, &crc, 4);
    testing::WriteFileBytes(TfRecordIndexPath(path_), index_);
  }

  testing::TempDir dir_;
  std::string path_;
  std::string index_;
};

TEST_F(ForgedIndex, ACountWhoseBytesOverflowIsRefused) {
  Forge(24, (uint64_t{1} << 61) + 3);  // 8 * count wraps around to 24
  EXPECT_THAT(ReadTfRecordIndex(path_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("a count of 2305843009213693955 records does not "
                                                              "match its size of 60 bytes")));
}

TEST_F(ForgedIndex, OffsetsOutOfOrderOrPastTheEndAreRefused) {
  Forge(32 + 8, 30);  // record 1 too close to record 2
  EXPECT_THAT(ReadTfRecordIndex(path_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("record 2's offset 35 is out of order")));
  Forge(32 + 8, 17);
  Forge(32 + 16, 1000);
  EXPECT_THAT(ReadTfRecordIndex(path_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("record 2's offset 1000 is out of order or past")));
}

TEST_F(ForgedIndex, AnIndexOfNoRecordsForAFileOfSomeIsRefused) {
  // The offsets cut away and the count 0, its CRC right: len() said 0 and
  // the pass still read the file's 3 records.
  index_.erase(32, 3 * 8);
  Forge(24, 0);
  EXPECT_THAT(ReadTfRecordIndex(path_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("it lists no record for a file of 54 bytes")));
}

TEST_F(ForgedIndex, AFirstRecordAfterTheFilesStartIsRefused) {
  Forge(32, 17);  // record 0 where record 1 is: record 0 would be read by no split
  EXPECT_THAT(ReadTfRecordIndex(path_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("its first record is at offset 17, not at the file's "
                                                              "start")));
}

TEST(TfRecordIndex, IndexingACorruptFileFails) {
  testing::TempDir dir;
  const std::string path = dir.Join("a.tfrecord");
  testing::WriteTfRecords(path, {"x", "yy"});
  testing::IncrementByte(path, 17 + 12);
  EXPECT_THAT(WriteTfRecordIndex(path), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("offset 17")));
}

}  // namespace
}  // namespace sluice::io
