// Copies rows from batches into a new batch, for the nodes that must move
// rows (shuffle, filter, re-batching). One memcpy per row per column (one
// per column for a run of rows), into pooled buffers.
#ifndef SLUICE_EXEC_ROW_COPIER_H_
#define SLUICE_EXEC_ROW_COPIER_H_

#include <cstdint>
#include <deque>

#include "sluice/core/batch.h"
#include "sluice/core/batch_builder.h"
#include "sluice/core/schema.h"

namespace sluice::exec {

// Thread-compatible.
class RowCopier {
 public:
  // `schema` must outlive the copier.
  RowCopier(const Schema& schema, int64_t capacity, BufferPool* pool = BufferPool::Default());
  // Goes on from `start`'s rows in place (BatchBuilder::ExtendsInPlace).
  RowCopier(const Schema& schema, int64_t capacity, Batch start);

  int64_t rows() const { return builder_.rows(); }
  // Appends rows [begin, end) of `src`. REQUIRES: src has the schema's
  // layout and rows() + (end - begin) <= capacity.
  void Append(const Batch& src, int64_t begin, int64_t end);
  // Appends up to `max_rows` rows from the front of `queue`, then drops
  // them from it (a batch taken in part stays as the slice after them).
  // Returns the rows appended. REQUIRES: rows() + max_rows <= capacity.
  int64_t TakeFront(std::deque<Batch>* queue, int64_t max_rows);
  Batch Finish() { return builder_.Finish(); }

 private:
  const Schema& schema_;
  std::vector<int64_t> row_bytes_;
  BatchBuilder builder_;
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_ROW_COPIER_H_
