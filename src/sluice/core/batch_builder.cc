#include "sluice/core/batch_builder.h"

#include <algorithm>
#include <cstring>

namespace sluice {

BatchBuilder::BatchBuilder(const Schema& schema, int64_t capacity, BufferPool* pool, int64_t ragged_bytes)
    : pool_(pool), capacity_(capacity) {
  if (ragged_bytes <= 0) ragged_bytes = capacity * 64;
  columns_.resize(schema.size());
  ragged_.resize(schema.size());
  for (int i = 0; i < schema.size(); ++i) {
    const ColumnSpec& spec = schema.column(i);
    if (spec.ragged) {
      any_ragged_ = true;
      columns_[i].values = Tensor::Allocate(DType::kUInt8, Shape{ragged_bytes}, pool);
      columns_[i].offsets = Tensor::Allocate(DType::kInt64, Shape{capacity + 1}, pool);
      columns_[i].offsets.data<int64_t>()[0] = 0;
    } else {
      columns_[i].values = Tensor::Allocate(spec.dtype, spec.shape.WithLeading(capacity), pool);
    }
  }
}

BatchBuilder::BatchBuilder(const Schema& schema, int64_t capacity, Batch start)
    : pool_(nullptr),
      capacity_(capacity),
      rows_(start.rows),
      ragged_(start.columns.size()),
      provenance_(std::move(start.provenance)) {
  for (int i = 0; i < schema.size(); ++i) {
    const ColumnSpec& spec = schema.column(i);
    columns_.push_back(Column{Tensor(spec.dtype, spec.shape.WithLeading(capacity), start.columns[i].values.buffer())});
  }
}

bool BatchBuilder::ExtendsInPlace(const Batch& batch, int64_t capacity, MemoryKind kind) {
  if (batch.rows == 0) return false;
  for (const Column& c : batch.columns) {
    const Tensor& t = c.values;
    if (c.ragged() || !t.valid() || t.buffer().use_count() != 1) return false;
    const Buffer& block = *t.buffer();
    const size_t row_bytes = t.byte_size() / static_cast<size_t>(batch.rows);
    // Compared by division: row_bytes * capacity wraps for a batch of 2**62.
    if (block.owner() != nullptr || block.read_only() || block.memory_kind() != kind || t.raw_data() != block.data() ||
        row_bytes == 0 || block.size() / row_bytes < static_cast<size_t>(capacity)) {
      return false;
    }
  }
  return true;
}

void BatchBuilder::AppendBytes(int col, absl::string_view bytes) {
  std::memcpy(AppendUninitialized(col, static_cast<int64_t>(bytes.size())), bytes.data(), bytes.size());
}

int64_t BatchBuilder::RaggedBytes() const {
  int64_t bytes = 0;
  for (const Ragged& r : ragged_) bytes += r.used;
  return bytes;
}

bool BatchBuilder::RaggedFull() const {
  if (!any_ragged_ || ragged_cap_ == std::numeric_limits<int64_t>::max()) return false;
  int64_t rows = 0;
  for (const Ragged& r : ragged_) rows = std::max(rows, r.count);
  if (rows == 0) return false;
  const int64_t bytes = RaggedBytes();
  return bytes + bytes / rows > ragged_cap_;
}

int64_t BatchBuilder::RowsWithin() const {
  if (!any_ragged_ || rows_ == 0 || ragged_cap_ == std::numeric_limits<int64_t>::max()) return remaining();
  const int64_t bytes = RaggedBytes();
  const int64_t mean = std::max<int64_t>(bytes / rows_, 1);
  return std::min(remaining(), std::max<int64_t>(ragged_cap_ - bytes, 0) / mean);
}

uint8_t* BatchBuilder::AppendUninitialized(int col, int64_t size) {
  Column& c = columns_[col];
  Ragged& r = ragged_[col];
  const int64_t need = r.used + size;
  if (need > c.values.shape().dim(0)) {
    // Grow to what the rows left would take at the mean so far (an eighth
    // more), and by a quarter at least, so the copy happens a few times per
    // chunk at most. Doubling took a block of twice a chunk's bytes where a
    // source's size hint fell a little short. Twice what is needed at most:
    // one row of 4 MiB among small ones projected a block of 64 of them;
    // past 16 MiB, 16 MiB more or a quarter (a 100 MiB record copied into
    // a shuffle's dense chunk reserved 200 MiB for it). Never past the
    // ragged cap while within it.
    constexpr int64_t kLargeSlack = int64_t{16} << 20;
    const int64_t have = c.values.shape().dim(0);
    const int64_t rows_left = std::max<int64_t>(capacity_ - r.count - 1, 0);
    const int64_t slack = std::max(need / 4, std::min(need, kLargeSlack));
    const int64_t projected = std::min(need + need / (r.count + 1) * rows_left * 9 / 8, need + slack);
    // Past the cap (one row larger than it), by a quarter at least: exact
    // sizes would copy the column at every row.
    const int64_t size = need > ragged_cap_ ? std::max(need, have + have / 4)
                                            : std::min(std::max({need, projected, have + have / 4}), ragged_cap_);
    Tensor bigger = Tensor::Allocate(DType::kUInt8, Shape{size}, pool_);
    std::memcpy(bigger.raw_data(), c.values.raw_data(), r.used);
    c.values = std::move(bigger);
  }
  uint8_t* out = c.values.raw_data() + r.used;
  r.used = need;
  c.offsets.data<int64_t>()[++r.count] = r.used;
  return out;
}

Batch BatchBuilder::Finish() {
  Batch batch;
  batch.rows = rows_;
  batch.columns.reserve(columns_.size());
  for (size_t i = 0; i < columns_.size(); ++i) {
    const Column& c = columns_[i];
    if (c.ragged()) {
      batch.columns.push_back(Column{c.values.Slice(0, ragged_[i].used), c.offsets.Slice(0, rows_ + 1)});
    } else {
      batch.columns.push_back(c.Slice(0, rows_));
    }
  }
  batch.provenance = std::move(provenance_);
  columns_.clear();
  rows_ = 0;
  return batch;
}

}  // namespace sluice
