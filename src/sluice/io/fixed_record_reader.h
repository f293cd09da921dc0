// A SplitReader for formats of fixed-size records (IDX, CIFAR-10 binary):
// keeps the position in the split, the provenance and the row count, so a
// format only copies `n` records into rows.
#ifndef SLUICE_IO_FIXED_RECORD_READER_H_
#define SLUICE_IO_FIXED_RECORD_READER_H_

#include <algorithm>
#include <cstdint>

#include "sluice/core/status_macros.h"
#include "sluice/io/source_format.h"

namespace sluice::io {

class FixedRecordSplitReader : public SplitReader {
 public:
  explicit FixedRecordSplitReader(Split split) : split_(split), next_(split.begin_record) {}

  absl::StatusOr<int64_t> Read(int64_t max_rows, BatchBuilder* out) final {
    const int64_t n = std::min(max_rows, split_.end_record - next_);
    if (n <= 0) return 0;
    SLUICE_RETURN_IF_ERROR(ReadRecords(next_, n, out->rows(), out));
    AddProvenance(out->rows(), next_, n, split_.file, &out->provenance());
    out->AddRows(n);
    next_ += n;
    return n;
  }

  absl::StatusOr<int64_t> Skip(int64_t max_rows) final {
    const int64_t n = std::max<int64_t>(0, std::min(max_rows, split_.end_record - next_));
    next_ += n;
    return n;
  }

  absl::StatusOr<int64_t> View(int64_t max_rows, Batch* out) final {
    const int64_t n = std::min(max_rows, split_.end_record - next_);
    if (n <= 0) return 0;
    SLUICE_ASSIGN_OR_RETURN(out->columns, ViewRecords(next_, n));
    out->rows = n;
    out->provenance.AddRun(0, split_.file, next_);
    next_ += n;
    return n;
  }

 protected:
  // Records [first, first + n) as columns viewing the reader's memory.
  // REQUIRES: views().
  virtual absl::StatusOr<std::vector<Column>> ViewRecords(int64_t first, int64_t n) { return std::vector<Column>(); }

  // Writes records [first, first + n) of the file to rows [row, row + n).
  virtual absl::Status ReadRecords(int64_t first, int64_t n, int64_t row, BatchBuilder* out) = 0;
  // Rows [row, row + n) came from records [first, first + n) of `file`.
  virtual void AddProvenance(int64_t row, int64_t first, int64_t n, int32_t file, Provenance* provenance) {
    provenance->AddRun(row, file, first);
  }

 private:
  const Split split_;
  int64_t next_;
};

}  // namespace sluice::io

#endif  // SLUICE_IO_FIXED_RECORD_READER_H_
