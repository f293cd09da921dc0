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

}  // namespace
}  // namespace sluice::io
