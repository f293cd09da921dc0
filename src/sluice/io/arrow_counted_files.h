// Arrow input files whose reads are counted in what the engine reports
// holding, for Arrow IPC record batches: an uncompressed batch's columns
// are the very buffers the file's reads returned (no copy), so they were
// held, yet counted nowhere. A record batch of 120 MB read so held 128 MB
// of RSS that pipe.memory() did not show, from a local file or an object.
// Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
#ifndef SLUICE_IO_ARROW_COUNTED_FILES_H_
#define SLUICE_IO_ARROW_COUNTED_FILES_H_

#include <arrow/io/interfaces.h>

#include <memory>
#include <string>

namespace sluice::io {

// A local file mapped, what is read from it counted in MappedFileBytes
// (random_access_file.h) while buffers hold it: RSS counts its pages once
// read.
arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenCountedMapping(const std::string& path);

// `file` (an object's), the buffers its reads return counted in
// HeldObjectReadBytes while they live. Not allocated from the decode pool:
// that keeps what is freed, and a compressed batch's body, freed once
// decoded, would stay beside the decoded columns.
std::shared_ptr<arrow::io::RandomAccessFile> CountingReads(std::shared_ptr<arrow::io::RandomAccessFile> file);
// The bytes of buffers read through CountingReads files that live now.
int64_t HeldObjectReadBytes();

}  // namespace sluice::io

#endif  // SLUICE_IO_ARROW_COUNTED_FILES_H_
