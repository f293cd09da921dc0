#include "sluice/io/tfrecord_index.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
  EXPECT_THAT(ReadTfRecordIndex(path),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("stale index")));
}

TEST(TfRecordIndex, CorruptIndexIsDataLoss) {
  testing::TempDir dir;
  const std::string path = dir.Join("a.tfrecord");
  testing::WriteTfRecords(path, {"x", "yy"});
  ASSERT_TRUE(WriteTfRecordIndex(path).ok());
  testing::IncrementByte(TfRecordIndexPath(path), 33);
  EXPECT_THAT(ReadTfRecordIndex(path), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("crc mismatch")));
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
