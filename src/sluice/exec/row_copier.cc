#include "sluice/exec/row_copier.h"

#include <algorithm>
#include <cstring>

namespace sluice::exec {

namespace {

std::vector<int64_t> RowBytes(const Schema& schema) {
  std::vector<int64_t> bytes;
  for (const ColumnSpec& c : schema.columns()) bytes.push_back(c.row_bytes());
  return bytes;
}

}  // namespace

RowCopier::RowCopier(const Schema& schema, int64_t capacity, BufferPool* pool)
    : schema_(schema), row_bytes_(RowBytes(schema)), builder_(schema, capacity, pool) {}

RowCopier::RowCopier(const Schema& schema, int64_t capacity, Batch start)
    : schema_(schema), row_bytes_(RowBytes(schema)), builder_(schema, capacity, std::move(start)) {}

void RowCopier::Append(const Batch& src, int64_t begin, int64_t end) {
  const int64_t dst_row = builder_.rows();
  for (int c = 0; c < schema_.size(); ++c) {
    const Column& col = src.columns[c];
    if (col.ragged()) {
      for (int64_t r = begin; r < end; ++r) builder_.AppendBytes(c, col.RaggedRow(r));
    } else {
      std::memcpy(builder_.dense(c) + dst_row * row_bytes_[c], col.values.raw_data() + begin * row_bytes_[c],
                  (end - begin) * row_bytes_[c]);
    }
  }
  for (int64_t r = begin; r < end; ++r) builder_.provenance().AddRow(dst_row + r - begin, src.provenance, r);
  builder_.AddRows(end - begin);
}

int64_t RowCopier::TakeFront(std::deque<Batch>* queue, int64_t max_rows) {
  if (queue->empty()) return 0;
  Batch& front = queue->front();
  const int64_t n = std::min(front.rows, max_rows);
  Append(front, 0, n);
  if (n == front.rows) {
    queue->pop_front();
  } else {
    front = front.Slice(n, front.rows);
  }
  return n;
}

}  // namespace sluice::exec
