// The TFRecord index that `sluice index` writes beside a file (FILE.index), so
// splits can be record ranges instead of whole files. Layout (little-endian,
// see docs/formats.md):
//   "SLUICEIX" | u32 version (1) | u32 0 | u64 size of the indexed file |
//   u64 record count | u64 offset of each record | u32 masked crc32c of all
//   bytes before it
#ifndef SLUICE_IO_TFRECORD_INDEX_H_
#define SLUICE_IO_TFRECORD_INDEX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::io {

std::string TfRecordIndexPath(const std::string& tfrecord_path);

// Reads every record of `tfrecord_path` (checking CRCs) and writes its index.
// Returns the number of records.
absl::StatusOr<int64_t> WriteTfRecordIndex(const std::string& tfrecord_path);

// The record offsets of `tfrecord_path` from its index, or nullopt when it
// has none. DataLoss when the index is corrupt; FailedPrecondition when it
// was written for a different version of the file.
absl::StatusOr<std::optional<std::vector<uint64_t>>> ReadTfRecordIndex(const std::string& tfrecord_path);

}  // namespace sluice::io

#endif  // SLUICE_IO_TFRECORD_INDEX_H_
