// The batch node cuts chunks of any size into batches of the batch size,
// rows and origins in order, and holds no chunk smaller than a batch while
// it fills one: a chunk may view memory its producer needs back (a service
// worker's shared-memory ring).
#include <algorithm>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/exec/exec_context.h"
#include "sluice/exec/iterator.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::exec {
namespace {

// Chunks of the given row counts, row r of the stream holding the value r,
// from record r of file 0. Keeps a weak reference to each chunk's buffer.
class Chunks : public Iterator {
 public:
  explicit Chunks(std::vector<int64_t> sizes) : sizes_(std::move(sizes)) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    max_held_ = std::max(max_held_, held());
    *end = next_ == sizes_.size();
    if (*end) return absl::OkStatus();
    const int64_t rows = sizes_[next_++];
    Batch b;
    b.rows = rows;
    Column c;
    c.values = Tensor::Allocate(DType::kInt64, Shape{rows});
    for (int64_t i = 0; i < rows; ++i) c.values.data<int64_t>()[i] = row_ + i;
    buffers_.push_back(c.values.buffer());
    b.columns.push_back(std::move(c));
    b.provenance.AddRun(0, 0, row_);
    row_ += rows;
    *out = std::move(b);
    return absl::OkStatus();
  }

  void LimitNextRows(int64_t rows) override { limits_.push_back(rows); }

  // The most chunks something held when the next one was asked for.
  int max_held() const { return max_held_; }
  // What the consumer said it takes next, before each chunk it asked for.
  const std::vector<int64_t>& limits() const { return limits_; }

 private:
  // Chunks whose buffer something still holds.
  int held() const {
    int n = 0;
    for (const std::weak_ptr<void>& b : buffers_) n += b.expired() ? 0 : 1;
    return n;
  }

  std::vector<int64_t> sizes_;
  size_t next_ = 0;
  int64_t row_ = 0;
  std::vector<std::weak_ptr<void>> buffers_;
  int max_held_ = 0;
  std::vector<int64_t> limits_;
};

struct Batched {
  std::vector<int64_t> rows;     // each batch's
  std::vector<int64_t> values;   // every row's, in order
  std::vector<int64_t> records;  // every row's origin
  int max_held = 0;              // chunks held while the next was read
  std::vector<int64_t> limits;   // the input's LimitNextRows calls
};

Batched BatchAll(std::vector<int64_t> sizes, int64_t batch, bool drop_remainder) {
  ExecContext ctx(/*seed=*/1, /*threads=*/1, /*memory_limit=*/0, /*ordered=*/true, std::make_shared<BufferPool>());
  graph::CompiledNode node;
  node.output_schema = Schema({ColumnSpec{"x", DType::kInt64, Shape{}}});
  node.count = batch;
  node.drop_remainder = drop_remainder;
  auto input = std::make_unique<Chunks>(std::move(sizes));
  Chunks* chunks = input.get();
  std::unique_ptr<Iterator> it = MakeBatchIterator(IteratorArgs{&ctx, &node, 0, batch}, std::move(input));
  Batched got;
  while (true) {
    Batch out;
    bool end = false;
    EXPECT_TRUE(it->GetNext(&out, &end).ok());
    if (end) break;
    got.rows.push_back(out.rows);
    for (int64_t r = 0; r < out.rows; ++r) {
      got.values.push_back(out.columns[0].values.data<int64_t>()[r]);
      got.records.push_back(out.provenance.Origin(r).record);
    }
    out = Batch();
  }
  got.max_held = chunks->max_held();
  got.limits = chunks->limits();
  return got;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(BatchNode, SingleRowsBecomeBatchesInOrderHoldingNone) {
  const Batched got = BatchAll(std::vector<int64_t>(10, 1), 4, /*drop_remainder=*/false);
  EXPECT_EQ(got.rows, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(got.values, Iota(10));
  EXPECT_EQ(got.records, Iota(10));
  // Every row was copied as it came: no chunk was held while the next one
  // was read (holding them until the batch filled held three).
  EXPECT_EQ(got.max_held, 0);
}

TEST(BatchNode, ChunksOfABatchOrMorePassAsViewsAndTheRestIsCopied) {
  // 9 rows: two batches of 4 viewing the chunk, its last row then copied
  // together with the next chunks' rows.
  const Batched got = BatchAll({9, 2, 1, 5}, 4, /*drop_remainder=*/false);
  EXPECT_EQ(got.rows, (std::vector<int64_t>{4, 4, 4, 4, 1}));
  EXPECT_EQ(got.values, Iota(17));
  EXPECT_EQ(got.records, Iota(17));
}

// An input that hands out rows in pieces (the service's client) is told
// how many the batch still needs, so it hands out none the batch node
// would hold past its batch (rows a leaving consumer would lose).
TEST(BatchNode, TellsItsInputTheRowsTheBatchStillNeedsBeforeEachPull) {
  const Batched got = BatchAll({3, 3, 3, 1}, 4, /*drop_remainder=*/false);
  EXPECT_EQ(got.rows, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(got.values, Iota(10));
  // 4 for an empty batch, 1 after 3 rows, 2 after the 2 rows left over,
  // 3 after the 1 left then, 2 after the last chunk's row (then the end).
  EXPECT_EQ(got.limits, (std::vector<int64_t>{4, 1, 2, 3, 2}));
}

TEST(BatchNode, DropRemainderDropsOnlyTheLastPartialBatch) {
  const Batched got = BatchAll({3, 3, 3}, 4, /*drop_remainder=*/true);
  EXPECT_EQ(got.rows, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(got.values, Iota(8));
}

TEST(BatchNode, NoInputIsNoBatch) {
  EXPECT_TRUE(BatchAll({}, 4, /*drop_remainder=*/false).rows.empty());
  EXPECT_TRUE(BatchAll({0, 0}, 4, /*drop_remainder=*/false).rows.empty());
}

}  // namespace
}  // namespace sluice::exec
