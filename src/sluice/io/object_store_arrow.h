// An object as Arrow's own input file, for the sources that read with
// Arrow's readers (Parquet, Arrow IPC). Only in builds with Arrow.
#ifndef SLUICE_IO_OBJECT_STORE_ARROW_H_
#define SLUICE_IO_OBJECT_STORE_ARROW_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "arrow/io/interfaces.h"

namespace sluice::io {

// The store's object through Arrow's file system, with OpenObject's
// (object_store.h) errors: what OpenObject itself reads blocks from.
absl::StatusOr<std::shared_ptr<arrow::io::RandomAccessFile>> OpenArrowObject(const std::string& url);

// An object opened for Arrow's readers.
struct ArrowObject {
  std::shared_ptr<arrow::io::RandomAccessFile> file;
  // OK while the store still holds the version opened (its ETag asked
  // again); DataLoss naming the object once it changed. Null where nothing
  // can change under the reader (the cache's copy; a store without ETags).
  std::function<absl::Status()> unchanged;
};

// The object for the sources that read with Arrow's readers (Parquet,
// Arrow IPC), its version checked against the listing: with an object
// cache, OpenObject's file (the cache's copy) as Arrow's input file;
// without, Arrow's own file, whose ranged reads fetch the byte ranges the
// reader asks for (a footer, a row group's columns) rather than blocks.
// Its reads may span a rewrite: a reader asks `unchanged` before it hands
// on what it read.
absl::StatusOr<ArrowObject> OpenObjectForArrow(const std::string& url);
// OpenArrowObject, its version checked against the listing's.
absl::StatusOr<ArrowObject> OpenListedArrowObject(const std::string& url);

}  // namespace sluice::io

#endif  // SLUICE_IO_OBJECT_STORE_ARROW_H_
