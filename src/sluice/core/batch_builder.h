// Fills a Batch row by row: dense columns are allocated for the full
// capacity up front and written in place; ragged byte columns grow.
#ifndef SLUICE_CORE_BATCH_BUILDER_H_
#define SLUICE_CORE_BATCH_BUILDER_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/string_view.h"
#include "sluice/core/batch.h"
#include "sluice/core/schema.h"

namespace sluice {

// Thread-compatible.
class BatchBuilder {
 public:
  // Ragged columns start with room for
  // `ragged_bytes` bytes (default: 64 per row) and grow as needed.
  BatchBuilder(const Schema& schema, int64_t capacity, BufferPool* pool = BufferPool::Default(),
               int64_t ragged_bytes = 0);
  // Goes on from `start`'s rows where they are, no copy.
  // REQUIRES: ExtendsInPlace(start, capacity, ...).
  BatchBuilder(const Schema& schema, int64_t capacity, Batch start);
  // Whether `batch` can be gone on from in place up to `capacity` rows:
  // each column dense and the only holder of a writable block of `kind`
  // memory, which it starts, with room for `capacity` rows.
  static bool ExtendsInPlace(const Batch& batch, int64_t capacity, MemoryKind kind);

  int64_t rows() const { return rows_; }
  int64_t capacity() const { return capacity_; }
  int64_t remaining() const { return capacity_ - rows_; }
  // Ends the rows at `bytes` of ragged columns (large records: video
  // clips, volumes): RaggedFull once the next row at the mean so far would
  // pass them, and the columns grow no further than they need but for a
  // row larger on its own.
  void CapRaggedBytes(int64_t bytes) { ragged_cap_ = bytes; }
  // Whether the ragged bytes are at their cap (never without one).
  bool RaggedFull() const;
  // How many more rows fit: within the capacity and the ragged cap at the
  // mean row so far (the capacity while there is none; a reader that
  // appends rows of growing size checks RaggedFull as it goes).
  int64_t RowsWithin() const;

  // Row 0 of dense column `col` (capacity rows, row-major).
  uint8_t* dense(int col) const { return columns_[col].values.raw_data(); }
  // Sets the next value of ragged column `col`.
  void AppendBytes(int col, absl::string_view bytes);
  // Sets the next value of ragged column `col` to `size` bytes that the
  // caller writes at the returned address (before the next Append).
  uint8_t* AppendUninitialized(int col, int64_t size);
  // Marks `n` more rows as written.
  void AddRows(int64_t n) { rows_ += n; }
  Provenance& provenance() { return provenance_; }

  // The batch of rows() rows. The builder is empty afterwards.
  Batch Finish();

 private:
  struct Ragged {
    int64_t used = 0;
    int64_t count = 0;
  };
  BufferPool* pool_;
  int64_t capacity_;
  int64_t rows_ = 0;
  std::vector<Column> columns_;
  std::vector<Ragged> ragged_;
  bool any_ragged_ = false;
  int64_t ragged_cap_ = std::numeric_limits<int64_t>::max();
  // The ragged columns' bytes and rows so far.
  int64_t RaggedBytes() const;
  Provenance provenance_;
};

}  // namespace sluice

#endif  // SLUICE_CORE_BATCH_BUILDER_H_
