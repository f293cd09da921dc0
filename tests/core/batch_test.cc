#include "sluice/core/batch.h"

#include <memory>

#include "gtest/gtest.h"
#include "sluice/core/batch_builder.h"

namespace sluice {
namespace {

Schema TwoColumns() {
  return Schema({ColumnSpec{"x", DType::kInt64, Shape{2}}, ColumnSpec{"b", DType::kUInt8, Shape{}, true}});
}

// Three rows of TwoColumns(), in blocks of the default pool.
Batch TwoColumnsBatch() {
  const Schema schema = TwoColumns();
  BatchBuilder builder(schema, 4);
  for (int i = 0; i < 3; ++i) builder.AppendBytes(1, "r");
  builder.AddRows(3);
  return builder.Finish();
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

TEST(BatchBuilder, RowsWithinARaggedCapFollowTheMeanRowSoFar) {
  const Schema schema = TwoColumns();
  BatchBuilder builder(schema, 100);
  EXPECT_EQ(builder.RowsWithin(), 100);  // no cap
  builder.CapRaggedBytes(1000);
  EXPECT_EQ(builder.RowsWithin(), 100);  // no row to go by yet
  EXPECT_FALSE(builder.RaggedFull());
  builder.AppendBytes(1, std::string(300, 'r'));
  builder.AddRows(1);
  EXPECT_EQ(builder.RowsWithin(), 2);  // 700 left: two more of 300
  EXPECT_FALSE(builder.RaggedFull());
  builder.AppendBytes(1, std::string(500, 'r'));  // not yet counted as a row
  EXPECT_TRUE(builder.RaggedFull());              // 800 bytes, 400 a row
  builder.AddRows(1);
  EXPECT_EQ(builder.RowsWithin(), 0);
  const Schema dense({ColumnSpec{"x", DType::kInt64, Shape{2}}});
  BatchBuilder fixed(dense, 7);
  fixed.CapRaggedBytes(1);
  EXPECT_EQ(fixed.RowsWithin(), 7);  // no ragged column: the capacity
  EXPECT_FALSE(fixed.RaggedFull());
}

TEST(BatchBuilder, RaggedGrowthStopsAtTheCapButForTheRowItself) {
  const Schema schema = TwoColumns();
  BufferPool pool;
  BatchBuilder builder(schema, 100, &pool, /*ragged_bytes=*/8);
  builder.CapRaggedBytes(1 << 20);
  builder.AppendBytes(1, std::string(800 << 10, 'r'));  // projected: 1.6 MiB (twice the need); capped
  builder.AddRows(1);
  // The block, and the offsets' and the first bytes' (blocks of 64 KiB at most).
  EXPECT_LE(pool.stats().peak_live_bytes, (1 << 20) + 3 * (64 << 10));
  builder.AppendBytes(1, std::string(3 << 20, 'r'));  // past the cap: what the row needs
  builder.AddRows(1);
  const Batch b = builder.Finish();
  EXPECT_EQ(b.columns[1].RaggedRow(1).size(), size_t{3} << 20);
  const int64_t need = (800 << 10) + (3 << 20);  // not twice that
  EXPECT_LE(pool.stats().peak_live_bytes, (1 << 20) + need + (256 << 10));
}

TEST(BatchBuilder, ALargeFirstRowReservesAQuarterOrSixteenMiBMoreNotTwice) {
  // A 40 MiB record copied into a dense chunk of 8 rows (a shuffle's, a
  // batch's): a block of 80 MiB for it counted twice the memory touched.
  const Schema schema = TwoColumns();
  BufferPool pool;
  BatchBuilder builder(schema, 8, &pool);
  builder.AppendBytes(1, std::string(40 << 20, 'r'));
  builder.AddRows(1);
  // 56 MiB, in a block at most a quarter larger.
  EXPECT_LE(pool.stats().peak_live_bytes, size_t{70} << 20);
  EXPECT_EQ(builder.Finish().columns[1].RaggedRow(0).size(), size_t{40} << 20);
}

// Rows 0..rows-1 of one int64 pair column, in a pool block with room for
// `room` rows.
Batch PairRows(int64_t rows, int64_t room, BufferPool* pool) {
  Batch b;
  b.rows = rows;
  Tensor t(DType::kInt64, Shape{rows, 2}, pool->Allocate(static_cast<size_t>(room) * 16));
  for (int64_t i = 0; i < 2 * rows; ++i) t.data<int64_t>()[i] = i;
  b.columns.push_back(Column{std::move(t)});
  return b;
}

TEST(BatchBuilder, GoesOnFromABatchWithRoomWhereItsRowsAre) {
  const Schema schema({ColumnSpec{"x", DType::kInt64, Shape{2}}});
  BufferPool pool;
  Batch start = PairRows(3, 8, &pool);
  const uint8_t* block = start.columns[0].values.raw_data();
  ASSERT_TRUE(BatchBuilder::ExtendsInPlace(start, 8, MemoryKind::kHost));
  BatchBuilder builder(schema, 8, std::move(start));
  EXPECT_EQ(builder.rows(), 3);
  int64_t* x = reinterpret_cast<int64_t*>(builder.dense(0));
  for (int64_t i = 6; i < 16; ++i) x[i] = 100 + i;
  builder.AddRows(5);
  Batch b = builder.Finish();
  ASSERT_EQ(b.rows, 8);
  EXPECT_EQ(b.columns[0].values.shape(), (Shape{8, 2}));
  EXPECT_EQ(b.columns[0].values.raw_data(), block);  // no copy
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(b.columns[0].values.data<int64_t>()[i], i < 6 ? i : 100 + i) << i;
}

TEST(BatchBuilder, GoesOnInPlaceOnlyFromABlockItAloneHoldsWithRoom) {
  BufferPool pool;
  EXPECT_FALSE(BatchBuilder::ExtendsInPlace(PairRows(3, 3, &pool), 8, MemoryKind::kHost));  // no room
  EXPECT_FALSE(BatchBuilder::ExtendsInPlace(PairRows(3, 8, &pool), 8, MemoryKind::kPinnedHost));
  Batch shared = PairRows(3, 8, &pool);
  const Batch view = shared;  // another holder: its rows must not change
  EXPECT_FALSE(BatchBuilder::ExtendsInPlace(shared, 8, MemoryKind::kHost));
  Batch later = PairRows(4, 8, &pool).Slice(1, 4);  // does not start its block
  EXPECT_FALSE(BatchBuilder::ExtendsInPlace(later, 8, MemoryKind::kHost));
  std::vector<uint8_t> bytes(8 * 16);
  Batch adopted;
  adopted.rows = 3;
  adopted.columns.push_back(
      Column{Tensor(DType::kInt64, Shape{3, 2}, Buffer::Adopt(bytes.data(), bytes.size(), std::make_shared<int>(0)))});
  EXPECT_FALSE(BatchBuilder::ExtendsInPlace(adopted, 8, MemoryKind::kHost));            // memory owned elsewhere
  EXPECT_FALSE(BatchBuilder::ExtendsInPlace(TwoColumnsBatch(), 8, MemoryKind::kHost));  // ragged
}

TEST(BatchBuilder, ARaggedColumnSizedALittleShortGrowsToAboutWhatItsRowsNeed) {
  // 100 rows of 1,000 bytes in room for 90,000: past it, the column grows
  // to what the rows left need at the mean so far (doubling took 180,000).
  const Schema schema({ColumnSpec{"b", DType::kUInt8, Shape{}, true}});
  BatchBuilder builder(schema, 100, BufferPool::Default(), /*ragged_bytes=*/90000);
  for (int i = 0; i < 100; ++i) builder.AppendBytes(0, std::string(1000, static_cast<char>('a' + i % 26)));
  builder.AddRows(100);
  Batch b = builder.Finish();
  ASSERT_EQ(b.rows, 100);
  EXPECT_EQ(b.columns[0].RaggedRow(99), std::string(1000, static_cast<char>('a' + 99 % 26)));
  EXPECT_EQ(b.columns[0].RaggedRow(0), std::string(1000, 'a'));
  EXPECT_LE(b.columns[0].values.buffer()->size(), size_t{125000});
}

TEST(BatchBuilder, OneLargeRowAmongSmallOnesGrowsTheColumnToTwiceItsBytesAtMost) {
  // A 4 MiB row first of 64: the mean so far projected 64 of them (a block
  // of 256 MiB for a batch of 4.1 MiB).
  const Schema schema({ColumnSpec{"b", DType::kUInt8, Shape{}, true}});
  BatchBuilder builder(schema, 64, BufferPool::Default(), /*ragged_bytes=*/64 * 100);
  builder.AppendBytes(0, std::string(4 << 20, 'x'));
  for (int i = 1; i < 64; ++i) builder.AppendBytes(0, std::string(100, 'y'));
  builder.AddRows(64);
  Batch b = builder.Finish();
  ASSERT_EQ(b.rows, 64);
  EXPECT_EQ(b.columns[0].RaggedRow(0), std::string(4 << 20, 'x'));
  EXPECT_EQ(b.columns[0].RaggedRow(63), std::string(100, 'y'));
  EXPECT_LE(b.columns[0].values.buffer()->size(), size_t{16} << 20);
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

// A shuffled Python dataset's record r is its dataset[item]: each row says
// its item through slices and gathers, and consecutive records of other
// items do not merge into one run.
TEST(Provenance, RowsOfItemsKeepTheirItems) {
  auto files = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"DS"});
  Provenance p(files);
  p.AddItem(0, 0, 0, 41);
  p.AddItem(1, 0, 1, 7);
  p.AddItem(2, 0, 2, 19);
  EXPECT_EQ(p.Describe(1), "dataset[7] (record 1 of DS)");
  EXPECT_EQ(p.SampleId(1), SampleIdOf(0, 1));  // draws stay keyed by the record
  Provenance s = p.Slice(1, 3);
  EXPECT_EQ(s.Describe(0), "dataset[7] (record 1 of DS)");
  EXPECT_EQ(s.Describe(1), "dataset[19] (record 2 of DS)");
  Provenance gathered;
  gathered.AddRow(0, p, 0);
  gathered.AddRow(1, p, 1);
  EXPECT_EQ(gathered.Describe(0), "dataset[41] (record 0 of DS)");
  EXPECT_EQ(gathered.Describe(1), "dataset[7] (record 1 of DS)");
  // A shuffled row group's row: named by its row in the file.
  Provenance rows(files);
  rows.AddItem(0, 0, 5, 2, ItemKind::kFileRow);
  EXPECT_EQ(rows.Describe(0), "record 2 of DS");
  EXPECT_EQ(rows.Slice(0, 1).Describe(0), "record 2 of DS");
  Provenance moved;
  moved.AddRow(0, rows, 0);
  EXPECT_EQ(moved.Describe(0), "record 2 of DS");
  EXPECT_EQ(moved.SampleId(0), SampleIdOf(0, 5));
}

}  // namespace
}  // namespace sluice
