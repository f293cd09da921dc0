// A local file mapped for Arrow's readers, what they read from it counted
// in MappedFileBytes (random_access_file.h) while their buffers hold it:
// an uncompressed Arrow IPC record batch's columns are slices of the
// mapping (no copy), and RSS counts their pages once read. Arrow's own
// mapped file counted nothing: a record batch of 120 MB read so held
// 128 MB of RSS that pipe.memory() did not show.
// Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
#ifndef SLUICE_IO_ARROW_MAPPED_FILE_H_
#define SLUICE_IO_ARROW_MAPPED_FILE_H_

#include <arrow/io/interfaces.h>

#include <memory>
#include <string>

namespace sluice::io {

arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenCountedMapping(const std::string& path);

}  // namespace sluice::io

#endif  // SLUICE_IO_ARROW_MAPPED_FILE_H_
