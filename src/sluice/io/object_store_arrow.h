// An object as Arrow's own input file, for the sources that read with
// Arrow's readers (Parquet, Arrow IPC). Only in builds with Arrow.
#ifndef SLUICE_IO_OBJECT_STORE_ARROW_H_
#define SLUICE_IO_OBJECT_STORE_ARROW_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "arrow/io/interfaces.h"

namespace sluice::io {

// The store's object through Arrow's file system, with OpenObject's
// (object_store.h) errors: what OpenObject itself reads blocks from.
absl::StatusOr<std::shared_ptr<arrow::io::RandomAccessFile>> OpenArrowObject(const std::string& url);

// OpenObject's file (its version checked against the listing, its blocks
// fetched ahead, the object cache) as Arrow's input file, for the sources
// that read with Arrow's readers.
absl::StatusOr<std::shared_ptr<arrow::io::RandomAccessFile>> OpenObjectForArrow(const std::string& url);

}  // namespace sluice::io

#endif  // SLUICE_IO_OBJECT_STORE_ARROW_H_
