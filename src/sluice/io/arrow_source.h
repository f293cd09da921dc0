// Parquet and Arrow IPC files as sources, read with Apache Arrow's C++
// libraries (the ones pyarrow's wheel ships: Debian 12 packages no Arrow
// C++). One split per Parquet row group or Arrow IPC record batch, so
// shuffling, the service and exactly-once work as with any format.
//
// Columns map to sluice's by their Arrow type: binary and string (and the
// large kinds) become ragged uint8 byte columns (encoded images for the
// decode ops); fixed_size_binary(n) a dense uint8 [n]; int8, int16, int32
// and uint16 int32; int64 and uint32 int64; uint8 and bool uint8; float16,
// float32 and float64 float32; fixed_size_list<T, n> (nested for more
// dimensions) a dense [n, ...] of T's column type. A null is a corrupt
// record (or, under on_corrupt "skip", a counted skip).
#ifndef SLUICE_IO_ARROW_SOURCE_H_
#define SLUICE_IO_ARROW_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/io/source_format.h"

namespace sluice::io {

// kMemory: batches held in this process (HoldArrowStream), named in place of files.
enum class ColumnarFormat { kParquet, kArrowIpc, kMemory };

// Whether this build reads them (it needs Arrow's libraries at build time).
bool HaveArrow();

// `patterns`: paths or glob patterns; `columns`: the columns to read, in
// that order (empty: all). NotFound for a pattern matching nothing or an
// unreadable file; InvalidArgument naming the column for one that is
// missing or of a type with no sluice column, and naming both files when
// two files' schemas differ; Unimplemented when !HaveArrow().
absl::StatusOr<std::unique_ptr<SourceFormat>> MakeColumnarSource(ColumnarFormat format,
                                                                 const std::vector<std::string>& patterns,
                                                                 const std::vector<std::string>& columns);

// The bytes of Parquet row groups and Arrow IPC record batches decoded in
// this process and still held (by readers, or by views of their rows), and
// of freed ones kept for the next (arrow_memory_pool.h). Not the files'
// mapped pages (MappedFileBytes), nor in-process Arrow data (the caller's);
// an uncompressed Arrow IPC object's columns, the bytes read, are counted.
int64_t ColumnarBytes();
// The most bytes of decoded row groups and record batches in use at once
// in this process.
int64_t ColumnarPeakBytes();
// Gives the kept ones back (at an epoch's end).
void TrimColumnar();

// In-process Arrow data (Python's sluice.from_arrow): imports the record
// batches of `arrow_array_stream` (a struct ArrowArrayStream*, the Arrow C
// stream interface, which this takes over) without copying their buffers,
// and holds them under the returned name, which a kMemory source reads in
// place of a file. InvalidArgument when the stream fails;
// Unimplemented when !HaveArrow().
absl::StatusOr<std::string> HoldArrowStream(void* arrow_array_stream);
// Drops the hold; sources made from it keep the batches while they live.
void ReleaseArrowStream(const std::string& name);

}  // namespace sluice::io

#endif  // SLUICE_IO_ARROW_SOURCE_H_
