// Where each record batch of an Arrow IPC file is and its rows, from the
// file's footer and each batch's message header alone: no column is read or
// decompressed. Arrow's reader has no call for it (CountRows totals them,
// reading every body unless the file is mapped), and reading a batch to
// count its rows read a whole file to list it (or one of its columns, which
// could be its largest), and failed the listing on damage in that column.
// Where each batch is lets a reader read one batch without the footer,
// which lists them all (Arrow's file reader parses it whole at each open).
// Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
#ifndef SLUICE_IO_ARROW_IPC_ROWS_H_
#define SLUICE_IO_ARROW_IPC_ROWS_H_

#include <arrow/io/interfaces.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::io {

// A record batch of the file: where its message is (its footer's block)
// and its rows (its header's).
struct IpcRecordBatch {
  int64_t offset;
  int32_t metadata_length;
  int64_t body_length;
  int64_t rows;
};

// The record batches, in the file's order; DataLoss naming `path` and what
// is wrong when the footer or a header does not parse.
absl::StatusOr<std::vector<IpcRecordBatch>> IpcRecordBatches(arrow::io::RandomAccessFile& file,
                                                             const std::string& path);

}  // namespace sluice::io

#endif  // SLUICE_IO_ARROW_IPC_ROWS_H_
