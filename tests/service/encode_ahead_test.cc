#include "sluice/service/encode_ahead.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/wire_batch.h"
#include "status_matchers.h"

namespace sluice::service {
namespace {

constexpr int kRows = 10;
constexpr int kRowBytes = 4;

std::unique_ptr<exec::Pipeline> TenRowsInBatchesOfThree() {
  std::vector<uint8_t> values(kRows * kRowBytes);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>(i * 7);
  absl::StatusOr<std::unique_ptr<exec::Pipeline>> pipeline =
      exec::Pipeline::Create(PipelineBuilder::Arrays({MakeArrayColumn("x", {kRowBytes}, values)}).Batch(3).Build());
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  return *std::move(pipeline);
}

// Encoded on the caller's thread (depth 0, as over TCP) or ahead on a
// thread of its own: the same messages, in order, then the end.
TEST(EncodeAhead, EveryDepthHandsOnEveryBatchInOrderThenTheEnd) {
  const std::unique_ptr<exec::Pipeline> pipeline = TenRowsInBatchesOfThree();
  for (size_t depth : {0, 1, 2}) {
    SCOPED_TRACE(depth);
    std::unique_ptr<exec::PipelineIterator> it = pipeline->Iterate(0);
    BatchMessage header;
    header.set_split(7);
    header.add_files("a.bin");
    EncodeAhead encoded(it.get(), header, COMPRESSION_NONE, nullptr, depth);
    std::vector<int64_t> rows, ids;
    std::vector<uint8_t> bytes;
    for (int message = 0;; ++message) {
      EncodeAhead::Encoded next;
      bool end = false;
      SLUICE_ASSERT_OK(encoded.Next(&next, &end));
      if (end) break;
      ReceivedBatch received;
      SLUICE_ASSERT_OK(ParseReceivedBatch(&next.bytes, BufferPool::Default(), nullptr, nullptr, &received));
      EXPECT_EQ(received.header.split(), 7);
      EXPECT_EQ(received.header.files_size(), message == 0 ? 1 : 0) << "files go with the first message only";
      ASSERT_OK_AND_ASSIGN(Batch batch, DecodeBatch(std::move(received), pipeline->output_schema(), nullptr));
      EXPECT_EQ(next.rows, batch.rows);
      rows.push_back(batch.rows);
      for (int64_t r = 0; r < batch.rows; ++r) ids.push_back(batch.provenance.SampleId(r));
      const uint8_t* x = batch.columns[0].values.raw_data();
      bytes.insert(bytes.end(), x, x + batch.rows * kRowBytes);
    }
    EXPECT_EQ(rows, (std::vector<int64_t>{3, 3, 3, 1}));
    EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    ASSERT_EQ(bytes.size(), size_t{kRows * kRowBytes});
    for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(bytes[i], static_cast<uint8_t>(i * 7)) << "byte " << i;
    EncodeAhead::Encoded after;
    bool end = false;
    SLUICE_EXPECT_OK(encoded.Next(&after, &end));
    EXPECT_TRUE(end) << "the end stays the end";
  }
}

// A stream cancelled after its first batch: destroying the encoder returns
// (the thread ahead is stopped, not left waiting for room).
TEST(EncodeAhead, StopsWhenItsStreamGoesAwayMidway) {
  const std::unique_ptr<exec::Pipeline> pipeline = TenRowsInBatchesOfThree();
  for (size_t depth : {0, 1, 2}) {
    SCOPED_TRACE(depth);
    std::unique_ptr<exec::PipelineIterator> it = pipeline->Iterate(0);
    auto encoded = std::make_unique<EncodeAhead>(it.get(), BatchMessage(), COMPRESSION_NONE, nullptr, depth);
    EncodeAhead::Encoded first;
    bool end = false;
    SLUICE_ASSERT_OK(encoded->Next(&first, &end));
    ASSERT_FALSE(end);
    EXPECT_EQ(first.rows, 3);
    encoded.reset();
  }
}

}  // namespace
}  // namespace sluice::service
