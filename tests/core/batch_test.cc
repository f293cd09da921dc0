#include "sluice/core/batch.h"

#include <memory>

#include "gtest/gtest.h"
#include "sluice/core/batch_builder.h"

namespace sluice {
namespace {

Schema TwoColumns() {
  return Schema({ColumnSpec{"x", DType::kInt64, Shape{2}}, ColumnSpec{"b", DType::kUInt8, Shape{}, true}});
}

TEST(BatchBuilder, BuildsDenseAndRaggedColumns) {
  const Schema schema = TwoColumns();
  BatchBuilder builder(schema, 4, BufferPool::Default(), /*ragged_bytes=*/2);
  int64_t* x = reinterpret_cast<int64_t*>(builder.dense(0));
  for (int i = 0; i < 3; ++i) {
    x[2 * i] = i;
    x[2 * i + 1] = 10 * i;
    builder.AppendBytes(1, std::string(i + 1, static_cast<char>('a' + i)));  // grows past 2 bytes
  }
  builder.AddRows(3);
  Batch b = builder.Finish();
  ASSERT_EQ(b.rows, 3);
  EXPECT_EQ(b.columns[0].values.shape(), (Shape{3, 2}));
  EXPECT_EQ(b.columns[0].values.data<int64_t>()[5], 20);
  EXPECT_EQ(b.columns[1].RaggedRow(0), "a");
  EXPECT_EQ(b.columns[1].RaggedRow(2), "ccc");

  Batch tail = b.Slice(1, 3);
  EXPECT_EQ(tail.rows, 2);
  EXPECT_EQ(tail.columns[0].values.data<int64_t>()[0], 1);
  EXPECT_EQ(tail.columns[1].RaggedRow(0), "bb");
}

TEST(Provenance, NamesFileAndRecordOfEachRow) {
  auto files = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"a.tfrecord", "b.tfrecord"});
  Provenance p(files);
  p.AddRun(0, 0, 10);  // rows 0..4: a records 10..14
  p.AddRun(5, 1, 0);   // rows 5..: b records 0..
  EXPECT_EQ(p.Describe(3), "record 13 of a.tfrecord");
  EXPECT_EQ(p.Describe(7), "record 2 of b.tfrecord");
  Provenance s = p.Slice(4, 7);
  EXPECT_EQ(s.Describe(0), "record 14 of a.tfrecord");
  EXPECT_EQ(s.Describe(2), "record 1 of b.tfrecord");

  Provenance gathered;
  gathered.AddRow(0, p, 6);
  gathered.AddRow(1, p, 2);
  EXPECT_EQ(gathered.Describe(0), "record 1 of b.tfrecord");
  EXPECT_EQ(gathered.Describe(1), "record 12 of a.tfrecord");
}

}  // namespace
}  // namespace sluice
