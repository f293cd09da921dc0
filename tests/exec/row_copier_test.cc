// Rows copied from several batches make the batch of those rows, values
// and origins alike.
#include "sluice/exec/row_copier.h"

#include <cstring>
#include <deque>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::exec {
namespace {

// `rows` rows of 3 uint8 values (row r: 3r, 3r+1, 3r+2 plus `offset`), from
// records first_record.. of file 0.
Batch Rows(int64_t rows, uint8_t offset, int64_t first_record) {
  Batch b;
  b.rows = rows;
  Column c;
  c.values = Tensor::Allocate(DType::kUInt8, Shape{rows, 3});
  for (int64_t i = 0; i < rows * 3; ++i) c.values.data<uint8_t>()[i] = static_cast<uint8_t>(offset + i);
  b.columns.push_back(std::move(c));
  b.provenance.AddRun(0, 0, first_record);
  return b;
}

TEST(RowCopier, RangesOfSeveralBatchesBecomeOneBatchInOrder) {
  const Schema schema({ColumnSpec{"x", DType::kUInt8, Shape{3}}});
  RowCopier copier(schema, 5);
  const Batch a = Rows(4, 0, 100), b = Rows(3, 200, 500);
  copier.Append(a, 1, 3);  // rows 1, 2 of a
  copier.Append(b, 0, 3);  // all of b
  EXPECT_EQ(copier.rows(), 5);
  const Batch out = copier.Finish();
  ASSERT_EQ(out.rows, 5);
  const std::vector<uint8_t> want = {3, 4, 5, 6, 7, 8, 200, 201, 202, 203, 204, 205, 206, 207, 208};
  EXPECT_EQ(
      std::vector<uint8_t>(out.columns[0].values.data<uint8_t>(), out.columns[0].values.data<uint8_t>() + want.size()),
      want);
  EXPECT_EQ(out.provenance.Origin(0).record, 101);
  EXPECT_EQ(out.provenance.Origin(2).record, 500);
  EXPECT_EQ(out.provenance.Origin(4).record, 502);
}

TEST(RowCopier, TakeFrontTakesWholeBatchesAndLeavesTheRestOfOne) {
  const Schema schema({ColumnSpec{"x", DType::kUInt8, Shape{3}}});
  std::deque<Batch> queue;
  queue.push_back(Rows(2, 0, 10));
  queue.push_back(Rows(3, 100, 20));
  RowCopier copier(schema, 4);
  EXPECT_EQ(copier.TakeFront(&queue, 4), 2);  // the first whole
  EXPECT_EQ(copier.TakeFront(&queue, 2), 2);  // two of the second's three
  ASSERT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.front().rows, 1);
  EXPECT_EQ(queue.front().columns[0].values.data<uint8_t>()[0], 106);
  EXPECT_EQ(queue.front().provenance.Origin(0).record, 22);
  const Batch out = copier.Finish();
  ASSERT_EQ(out.rows, 4);
  EXPECT_EQ(out.columns[0].values.data<uint8_t>()[9], 103);  // row 3: the second's row 1
  EXPECT_EQ(out.provenance.Origin(3).record, 21);
  std::deque<Batch> empty;
  RowCopier none(schema, 1);
  EXPECT_EQ(none.TakeFront(&empty, 1), 0);
}

}  // namespace
}  // namespace sluice::exec
