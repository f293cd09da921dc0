// File lists and splits: the unit of work distribution. A split is a whole
// file or a range of records of a file whose records can be located (fixed
// size records, or a TFRecord index).
#ifndef SLUICE_IO_FILE_SPLIT_H_
#define SLUICE_IO_FILE_SPLIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::io {

// Expands paths and glob patterns, in order, each pattern's matches sorted.
// NotFound naming the pattern when it matches nothing.
absl::StatusOr<std::vector<std::string>> ExpandFilePatterns(const std::vector<std::string>& patterns);

// `path` with glob's special characters escaped: ExpandFilePatterns of it
// yields exactly `path` (a file list resolved earlier, taken literally).
std::string GlobEscape(const std::string& path);

struct Split {
  int32_t file = 0;          // index into the source's file list
  int64_t begin_record = 0;  // first record
  int64_t end_record = -1;   // one past the last; -1: to the end of the file

  // Its records; -1 when it runs to the end of its file (count unknown).
  int64_t records() const { return end_record < 0 ? -1 : end_record - begin_record; }
};

// Splits of `records_per_file[i]` records each, `split_records` per split
// (0: one split per file).
std::vector<Split> MakeRecordSplits(const std::vector<int64_t>& records_per_file, int64_t split_records);

}  // namespace sluice::io

#endif  // SLUICE_IO_FILE_SPLIT_H_
