// Columns held in memory as a source (PipelineDef's ArraySource): small
// datasets, tests, and the trivial pipeline that measures per-batch overhead.
#ifndef SLUICE_IO_ARRAY_SOURCE_H_
#define SLUICE_IO_ARRAY_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/core/schema.h"
#include "sluice/io/source_format.h"

namespace sluice::io {

struct ArrayColumnData {
  ColumnSpec spec;   // dense; shape is per row
  std::string data;  // all rows, row-major
};

// The bytes of arrays sources' rows this process holds: each source's copy
// and, counted by whoever keeps one, each definition's (CountedArrayBytes).
int64_t HeldArrayBytes();

// Counts `bytes` in HeldArrayBytes while it lives.
class CountedArrayBytes {
 public:
  explicit CountedArrayBytes(int64_t bytes);
  ~CountedArrayBytes();
  CountedArrayBytes(const CountedArrayBytes&) = delete;
  CountedArrayBytes& operator=(const CountedArrayBytes&) = delete;

 private:
  const int64_t bytes_;
};

// InvalidArgument naming the column when its bytes are not a whole number of
// rows, when the columns disagree on the row count, or when a name repeats.
// Rows are fixed-size, so `split_records` > 0 splits into row ranges.
absl::StatusOr<std::unique_ptr<SourceFormat>> MakeArraySource(std::vector<ArrayColumnData> columns,
                                                              int64_t split_records = 0);

}  // namespace sluice::io

#endif  // SLUICE_IO_ARRAY_SOURCE_H_
