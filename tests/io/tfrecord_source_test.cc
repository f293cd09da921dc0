#include "sluice/io/tfrecord_source.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/io/tfrecord_index.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::io {
namespace {

// The records a split's reader yields, with their record numbers; `skip`
// rows passed over first.
std::vector<std::pair<int64_t, std::string>> ReadSplit(const SourceFormat& source, const Split& split,
                                                       int64_t skip = 0) {
  std::vector<std::pair<int64_t, std::string>> out;
  auto reader = source.OpenSplit(split, nullptr);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  if (skip > 0) EXPECT_TRUE((*reader)->Skip(skip).ok());
  BatchBuilder builder(source.schema(), 100);
  builder.provenance() = Provenance(source.files());
  while (true) {
    auto n = (*reader)->Read(3, &builder);  // a few at a time: the range's end falls mid-call
    EXPECT_TRUE(n.ok());
    if (!n.ok() || *n == 0) break;
  }
  const Batch b = builder.Finish();
  for (int64_t r = 0; r < b.rows; ++r) {
    const auto bytes = b.columns[0].RaggedRow(r);
    out.emplace_back(b.provenance.Origin(r).record,
                     std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  return out;
}

// A record range of a file, indexed or not, yields exactly its records:
// its begin reached by seeking or by passing over headers, its end by the
// index's offset or by counting.
TEST(TfRecordSource, ARecordRangeYieldsExactlyItsRecordsIndexedOrNot) {
  testing::TempDir dir;
  std::vector<std::string> written;
  for (int i = 0; i < 10; ++i) written.push_back(std::string(3 + i, static_cast<char>('a' + i)));
  const std::string path = dir.Join("data.tfrecord");
  testing::WriteTfRecords(path, written);
  for (bool indexed : {false, true}) {
    SCOPED_TRACE(indexed);
    if (indexed) ASSERT_TRUE(WriteTfRecordIndex(path).ok());
    ASSERT_OK_AND_ASSIGN(auto source, MakeTfRecordSource({path}, indexed ? 4 : 0));
    for (auto [begin, end, skip] :
         {std::tuple<int64_t, int64_t, int64_t>{2, 7, 0}, {0, 3, 1}, {5, -1, 2}, {4, 4, 0}, {6, 8, 5}}) {
      SCOPED_TRACE(::testing::Message() << begin << ".." << end << " skip " << skip);
      std::vector<std::pair<int64_t, std::string>> want;
      for (int64_t r = begin + skip; r < (end < 0 ? 10 : end); ++r) want.emplace_back(r, written[r]);
      EXPECT_EQ(ReadSplit(*source, Split{0, begin, end}, skip), want);
    }
  }
}

// A resumed split of a file read whole (no record ranges asked for) seeks
// to its record through the file's index: opening it reads the index, not
// the 1.1 MiB of records before it. Where corrupt records are skipped it
// passes over them by their headers, numbering them as reading does.
TEST(TfRecordSource, AResumedSplitOfAFileReadWholeSeeksThroughItsIndex) {
  testing::TempDir dir;
  std::vector<std::string> written;
  for (int i = 0; i < 40; ++i) written.push_back(std::string(32 << 10, static_cast<char>('a' + i % 26)));
  const std::string path = dir.Join("data.tfrecord");
  testing::WriteTfRecords(path, written);
  ASSERT_TRUE(WriteTfRecordIndex(path).ok());
  ASSERT_OK_AND_ASSIGN(auto source, MakeTfRecordSource({path}, 0));
  const int64_t before = testing::BytesReadByThisProcess();
  ASSERT_GE(before, 0) << "no /proc/self/io";
  ASSERT_OK_AND_ASSIGN(auto opened, source->OpenSplit(Split{0, 35, -1}, nullptr));
  const int64_t read = testing::BytesReadByThisProcess() - before;
  EXPECT_LT(read, 64 << 10) << "read " << read << " bytes to open a split at record 35";
  std::vector<std::pair<int64_t, std::string>> want;
  for (int64_t r = 35; r < 40; ++r) want.emplace_back(r, written[r]);
  EXPECT_EQ(ReadSplit(*source, Split{0, 35, -1}), want);
  CorruptionLog log;
  ASSERT_OK_AND_ASSIGN(auto skipping, source->OpenSplit(Split{0, 35, -1}, &log));
  BatchBuilder builder(source->schema(), 10);
  builder.provenance() = Provenance(source->files());
  ASSERT_OK_AND_ASSIGN(const int64_t rows, skipping->Read(10, &builder));
  EXPECT_EQ(rows, 5);
  EXPECT_EQ(builder.Finish().provenance.Origin(0).record, 35);
}

}  // namespace
}  // namespace sluice::io
