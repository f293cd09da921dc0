// TFRecord files as a source: one ragged "record" column of raw bytes
// (parse_example turns them into features, in parallel, downstream).
#ifndef SLUICE_IO_TFRECORD_SOURCE_H_
#define SLUICE_IO_TFRECORD_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/io/source_format.h"

namespace sluice::io {

inline constexpr char kRecordColumn[] = "record";

// `patterns`: paths or globs (NotFound naming a pattern that matches nothing).
// With `split_records` > 0, files that have an index (`sluice index`) are
// split into ranges of that many records; others are read whole.
absl::StatusOr<std::unique_ptr<SourceFormat>> MakeTfRecordSource(const std::vector<std::string>& patterns,
                                                                 int64_t split_records = 0);

}  // namespace sluice::io

#endif  // SLUICE_IO_TFRECORD_SOURCE_H_
