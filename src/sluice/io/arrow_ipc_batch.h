// One record batch of an Arrow IPC file, read from where the listing found
// it (IpcRecordBatches): Arrow's file reader parses the whole footer, which
// lists every batch, at each open, and a reader opened per batch made a
// file of 128,000 small batches take 29 s where pyarrow takes 1 (0.23 ms a
// batch). Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
#ifndef SLUICE_IO_ARROW_IPC_BATCH_H_
#define SLUICE_IO_ARROW_IPC_BATCH_H_

#include <arrow/io/interfaces.h>
#include <arrow/ipc/options.h>
#include <arrow/record_batch.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/io/arrow_ipc_rows.h"

namespace sluice::io {

// What the listing of an IPC file found.
struct ListedIpcFile {
  std::shared_ptr<arrow::Schema> schema;
  std::vector<IpcRecordBatch> batches;
  std::string version;  // the file's, as the reader checks it before reading from these blocks
};

// Record batch `index` of `file`, validated; `where` names it in errors.
// A schema with dictionary-encoded fields reads through Arrow's file
// reader, which reads the dictionaries the footer lists.
absl::StatusOr<std::shared_ptr<arrow::RecordBatch>> ReadIpcRecordBatch(
    const std::shared_ptr<arrow::io::RandomAccessFile>& file, const ListedIpcFile& listed, int index,
    const arrow::ipc::IpcReadOptions& options, const std::string& where);

}  // namespace sluice::io

#endif  // SLUICE_IO_ARROW_IPC_BATCH_H_
