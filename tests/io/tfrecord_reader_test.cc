#include "sluice/io/tfrecord_reader.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/io/crc32c.h"
#include "sluice/io/tfrecord_writer.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

class TfRecordReaderTest : public ::testing::Test {
 protected:
  // Three records of 10, 20 and 30 bytes: frames at offsets 0, 26, 62.
  void SetUp() override {
    path_ = dir_.Join("data.tfrecord");
    testing::WriteTfRecords(path_, {std::string(10, 'a'), std::string(20, 'b'), std::string(30, 'c')});
  }

  // Reads every record; returns the first error.
  absl::StatusOr<std::vector<std::string>> ReadAll(CorruptionLog* log = nullptr) {
    TfRecordReader::Options options;
    options.skip_log = log;
    options.buffer_bytes = 16;  // forces refills in the middle of records
    auto reader = TfRecordReader::Open(path_, options);
    if (!reader.ok()) return reader.status();
    std::vector<std::string> out;
    while (true) {
      auto r = (*reader)->Next();
      if (!r.ok()) return r.status();
      if (!*r) return out;
      out.emplace_back(**r);
    }
  }

  testing::TempDir dir_;
  std::string path_;
};

TEST_F(TfRecordReaderTest, ReadsWhatTheWriterWrote) {
  ASSERT_OK_AND_ASSIGN(auto records, ReadAll());
  EXPECT_THAT(records, ::testing::ElementsAre(std::string(10, 'a'), std::string(20, 'b'), std::string(30, 'c')));
}

// A first record of 35,615 (0x8b1f) or 559,903 (0x088b1f) bytes starts the
// file with gzip's magic (and method): it is a record, not gzip data.
TEST_F(TfRecordReaderTest, AFileStartingWithGzipsMagicAsALengthIsRead) {
  for (const size_t first : {size_t{35615}, size_t{559903}}) {
    testing::WriteTfRecords(path_, {std::string(first, 'x'), std::string(10, 'y')});
    ASSERT_OK_AND_ASSIGN(auto records, ReadAll());
    EXPECT_THAT(records, ::testing::ElementsAre(std::string(first, 'x'), std::string(10, 'y')));
  }
}

TEST_F(TfRecordReaderTest, FlippedLengthByteIsDataLossAtItsOffset) {
  testing::IncrementByte(path_, 26 + 1);  // the length of record 1
  EXPECT_THAT(ReadAll(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("length crc mismatch) in " + path_ + " at offset 26")));
}

TEST_F(TfRecordReaderTest, FlippedDataByteIsDataLossAtItsOffset) {
  testing::IncrementByte(path_, 62 + 12 + 5);  // inside record 2's data
  EXPECT_THAT(ReadAll(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("data crc mismatch) in " + path_ + " at offset 62")));
}

TEST_F(TfRecordReaderTest, TruncatedDataIsDataLoss) {
  testing::TruncateFile(path_, 62 + 12 + 10);
  EXPECT_THAT(ReadAll(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated record in " + path_ + " at offset 62")));
}

TEST_F(TfRecordReaderTest, TruncatedHeaderIsDataLoss) {
  testing::TruncateFile(path_, 62 + 5);
  EXPECT_THAT(ReadAll(), StatusIs(absl::StatusCode::kDataLoss,
                                  HasSubstr("truncated record header in " + path_ + " at offset 62")));
}

TEST_F(TfRecordReaderTest, NotATfRecordSaysSo) {
  testing::WriteFileBytes(path_, "this is a plain text file, not records\n");
  EXPECT_THAT(ReadAll(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("at offset 0 (is this a TFRecord file?)")));
}

TEST_F(TfRecordReaderTest, MissingFileIsNotFound) {
  EXPECT_THAT(TfRecordReader::Open(dir_.Join("nope.tfrecord")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope.tfrecord")));
}

TEST_F(TfRecordReaderTest, SkipPolicySkipsABadRecordAndCountsIt) {
  testing::IncrementByte(path_, 26 + 12 + 3);  // record 1's data
  CorruptionLog log;
  ASSERT_OK_AND_ASSIGN(auto records, ReadAll(&log));
  EXPECT_THAT(records, ::testing::ElementsAre(std::string(10, 'a'), std::string(30, 'c')));
  EXPECT_EQ(log.skipped(), 1);
  EXPECT_THAT(log.Summary(), HasSubstr("at offset 26"));
}

TEST_F(TfRecordReaderTest, SkipPolicyResynchronizesAfterABadLengthLosingOneRecord) {
  testing::IncrementByte(path_, 26);  // record 1's length: its frame is unknown
  CorruptionLog log;
  ASSERT_OK_AND_ASSIGN(auto records, ReadAll(&log));
  EXPECT_THAT(records, ::testing::ElementsAre(std::string(10, 'a'), std::string(30, 'c')));
  EXPECT_EQ(log.skipped(), 1);
  EXPECT_EQ(log.skipped_bytes(), 36u);
  EXPECT_THAT(log.Summary(), HasSubstr("length crc mismatch) in " + path_ +
                                       " at offset 26 (skipped 36 bytes, to "
                                       "the record at offset 62)"));
  EXPECT_THAT(log.Summary(), HasSubstr(path_ + ": 1 record, 36 bytes"));
}

TEST_F(TfRecordReaderTest, SkipPolicySkipsATruncatedTailCountingItsBytes) {
  testing::TruncateFile(path_, 62 + 12 + 10);
  CorruptionLog log;
  ASSERT_OK_AND_ASSIGN(auto records, ReadAll(&log));
  EXPECT_THAT(records, ::testing::ElementsAre(std::string(10, 'a'), std::string(20, 'b')));
  EXPECT_EQ(log.skipped_bytes(), 22u);
  EXPECT_THAT(log.Summary(), HasSubstr("at offset 62: its header declares 30 bytes of data, the file has 22 left "
                                       "for the whole frame (skipped the rest of the file, 22 bytes)"));
}

TEST_F(TfRecordReaderTest, ALengthNearTwoToTheSixtyFourIsSaidAsItIs) {
  // A length whose frame would wrap around (2^64 - 10), its CRC right: the
  // frame's size computed from it came out as 6 bytes.
  const uint64_t length = ~uint64_t{0} - 9;
  std::string header(12, '\0');
  std::memcpy(header.data(), &length, 8);
  const uint32_t crc = MaskCrc(Crc32c(header.data(), 8));
  std::memcpy(header.data() + 8, &crc, 4);
  std::string file = testing::ReadFileBytes(path_);
  file.replace(26, 12, header);
  testing::WriteFileBytes(path_, file);
  EXPECT_THAT(ReadAll(), StatusIs(absl::StatusCode::kDataLoss,
                                  HasSubstr("at offset 26: its header declares 18446744073709551606 bytes of data")));
}

// Records of different lengths, so no frame repeats another's bytes.
std::vector<std::string> VariedRecords(int n) {
  std::vector<std::string> records;
  for (int i = 0; i < n; ++i) records.push_back(std::string(5 + 3 * i, static_cast<char>('a' + i)));
  return records;
}

TEST_F(TfRecordReaderTest, ADamagedByteAnywhereCostsExactlyTheRecordHoldingIt) {
  const std::vector<std::string> written = VariedRecords(6);
  testing::WriteTfRecords(path_, written);
  size_t frame_start = 0;
  for (size_t r = 0; r < written.size(); ++r) {
    const size_t frame = 16 + written[r].size();
    for (size_t byte = frame_start; byte < frame_start + frame; ++byte) {
      testing::WriteTfRecords(path_, written);
      testing::IncrementByte(path_, byte);
      CorruptionLog log;
      SCOPED_TRACE(::testing::Message() << "byte " << byte << " of record " << r);
      ASSERT_OK_AND_ASSIGN(auto records, ReadAll(&log));
      std::vector<std::string> expected = written;
      expected.erase(expected.begin() + r);
      ASSERT_EQ(records, expected) << "byte " << byte << " of record " << r;
      ASSERT_EQ(log.skipped(), 1) << "byte " << byte;
      ASSERT_EQ(log.skipped_bytes(), frame) << "byte " << byte;
    }
    frame_start += frame;
  }
}

TEST_F(TfRecordReaderTest, WithTheIndexOffsetsADamagedStretchCountsEveryRecordInIt) {
  const std::vector<std::string> written = VariedRecords(8);
  testing::WriteTfRecords(path_, written);
  std::vector<uint64_t> offsets;
  for (size_t r = 0, at = 0; r < written.size(); at += 16 + written[r++].size()) offsets.push_back(at);
  for (int r : {2, 3, 4}) testing::IncrementByte(path_, offsets[r] + 3);  // three lengths in a row
  CorruptionLog log;
  TfRecordReader::Options options;
  options.skip_log = &log;
  options.record_offsets = &offsets;
  ASSERT_OK_AND_ASSIGN(auto reader, TfRecordReader::Open(path_, options));
  std::vector<int64_t> indices;
  while (true) {
    ASSERT_OK_AND_ASSIGN(auto record, reader->Next());
    if (!record) break;
    indices.push_back(reader->record_index() - 1);
    EXPECT_EQ(*record, written[indices.back()]);
  }
  EXPECT_THAT(indices, ::testing::ElementsAre(0, 1, 5, 6, 7));
  EXPECT_EQ(log.skipped(), 3);
  EXPECT_EQ(log.skipped_bytes(), offsets[5] - offsets[2]);
}

TEST_F(TfRecordReaderTest, SeekContinuesFromARecord) {
  auto reader = TfRecordReader::Open(path_);
  ASSERT_TRUE(reader.ok());
  (*reader)->Seek(62, 2);
  ASSERT_OK_AND_ASSIGN(auto r, (*reader)->Next());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, std::string(30, 'c'));
  EXPECT_EQ((*reader)->record_index(), 3);
}

// Skipping k records by their headers, then reading, gives what reading
// everything gives from record k on, with the same record numbers: on a
// clean file and with a damaged data CRC or length CRC before, at or after
// record k (skipped corruption counted as reading counts it).
TEST_F(TfRecordReaderTest, SkipPassesOverRecordsNumberingThemAsReadingDoes) {
  const std::vector<std::string> written = VariedRecords(7);
  std::vector<uint64_t> offsets;
  for (size_t r = 0, at = 0; r < written.size(); at += 16 + written[r++].size()) offsets.push_back(at);
  // (damaged byte, or none): record 2's length, record 4's data.
  for (int64_t damage : {int64_t{-1}, static_cast<int64_t>(offsets[2] + 3), static_cast<int64_t>(offsets[4] + 14)}) {
    testing::WriteTfRecords(path_, written);
    if (damage >= 0) testing::IncrementByte(path_, damage);
    auto read = [&](int64_t skip) {
      CorruptionLog log;
      TfRecordReader::Options options;
      options.skip_log = &log;
      options.buffer_bytes = 16;
      std::vector<std::pair<int64_t, std::string>> out;
      auto reader = TfRecordReader::Open(path_, options);
      EXPECT_TRUE(reader.ok());
      EXPECT_TRUE((*reader)->Skip(skip).ok());
      while (true) {
        auto r = (*reader)->Next();
        EXPECT_TRUE(r.ok());
        if (!r.ok() || !*r) return out;
        out.emplace_back((*reader)->record_index() - 1, std::string(**r));
      }
    };
    const std::vector<std::pair<int64_t, std::string>> all = read(0);
    ASSERT_EQ(all.size(), damage >= 0 ? 6u : 7u);
    for (int64_t skip = 0; skip <= 7; ++skip) {
      SCOPED_TRACE(::testing::Message() << "damage " << damage << ", skip " << skip);
      std::vector<std::pair<int64_t, std::string>> rest;
      for (const auto& r : all) {
        if (r.first >= skip) rest.push_back(r);
      }
      EXPECT_EQ(read(skip), rest);
    }
  }
}

// A local file's records are passed over by their headers where the file
// is mapped, not copied through the reader's buffer: twenty records of 256
// KiB (5 MiB) with small ones among them, or 190 of 3 KiB (570 KiB), cost
// under 64 KiB of reads. The record after the skip is read whole,
// numbered as reading would number it.
TEST_F(TfRecordReaderTest, SkipPassesOverALocalFilesRecordsWithoutReadingThem) {
  for (const auto [count, skip, large] : {std::tuple{24, 20, true}, std::tuple{200, 190, false}}) {
    SCOPED_TRACE(::testing::Message() << "skip " << skip << " of " << count);
    std::vector<std::string> written;
    for (int i = 0; i < count; ++i) {
      const size_t bytes = !large ? 3 << 10 : i % 4 == 3 ? 10 : 256 << 10;
      written.push_back(std::string(bytes, static_cast<char>('a' + i % 26)));
    }
    testing::WriteTfRecords(path_, written);
    ASSERT_OK_AND_ASSIGN(auto reader, TfRecordReader::Open(path_));
    const int64_t before = testing::BytesReadByThisProcess();
    ASSERT_GE(before, 0) << "no /proc/self/io";
    SLUICE_ASSERT_OK(reader->Skip(skip));
    const int64_t skipped = testing::BytesReadByThisProcess() - before;
    EXPECT_EQ(reader->record_index(), skip);
    EXPECT_LT(skipped, 64 << 10) << "read " << skipped << " bytes to pass over " << skip << " records";
    for (int i = skip; i < count; ++i) {
      ASSERT_OK_AND_ASSIGN(auto record, reader->Next());
      ASSERT_TRUE(record.has_value());
      EXPECT_EQ(*record, written[i]) << "record " << i;
    }
  }
}

}  // namespace
}  // namespace sluice::io
