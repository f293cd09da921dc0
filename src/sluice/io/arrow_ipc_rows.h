// The rows of each record batch of an Arrow IPC file, from the file's
// footer and each batch's message header alone: no column is read or
// decompressed. Arrow's reader has no call for it (CountRows totals them,
// reading every body unless the file is mapped), and reading a batch to
// count its rows read a whole file to list it (or one of its columns, which
// could be its largest), and failed the listing on damage in that column.
// Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
#ifndef SLUICE_IO_ARROW_IPC_ROWS_H_
#define SLUICE_IO_ARROW_IPC_ROWS_H_

#include <arrow/io/interfaces.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::io {

// The record batches' row counts, in the file's order; DataLoss naming
// `path` and what is wrong when the footer or a header does not parse.
absl::StatusOr<std::vector<int64_t>> IpcRecordBatchRows(arrow::io::RandomAccessFile& file, const std::string& path);

}  // namespace sluice::io

#endif  // SLUICE_IO_ARROW_IPC_ROWS_H_
