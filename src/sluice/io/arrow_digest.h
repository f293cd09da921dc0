// A digest of in-memory Arrow data, which names it where a file's path
// would: a state saved over a table resumes over the same table in another
// process, and is refused over other data.
#ifndef SLUICE_IO_ARROW_DIGEST_H_
#define SLUICE_IO_ARROW_DIGEST_H_

#include <arrow/api.h>

#include <memory>
#include <string>
#include <vector>

namespace sluice::io {

// "<crc32c as 8 hex digits>-<rows>" of the schema, each batch's row count
// and the bytes of every buffer of its columns (children and dictionaries
// too); of data over 256 MiB, each buffer's size and its first and last
// 256 bytes. Two tables whose buffers differ beyond their rows (slices of
// different parents) have different digests though their rows are equal.
std::string ArrowDigest(const arrow::Schema& schema, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches);

}  // namespace sluice::io

#endif  // SLUICE_IO_ARROW_DIGEST_H_
