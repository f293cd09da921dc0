// Arrow IPC file readers that read some of a file's fields: given
// `included_fields`, Arrow's reader fetches (and decompresses) only those
// fields' buffers of a record batch, not its whole body. Counting a file's
// rows for a listing read the whole file before (120 MB read and
// decompressed for one record batch of 120 MB), and a source asked for two
// of five columns read all five.
// Built only with Arrow (SLUICE_WITH_ARROW), as C++20: Arrow's headers
// require it.
#ifndef SLUICE_IO_ARROW_IPC_FIELDS_H_
#define SLUICE_IO_ARROW_IPC_FIELDS_H_

#include <arrow/io/interfaces.h>
#include <arrow/ipc/reader.h>

#include <memory>
#include <string>
#include <vector>

namespace sluice::io {

// The indices of `schema`'s fields named in `names`, in the schema's
// order; empty where that is every field.
std::vector<int> FieldsNamed(const arrow::Schema& schema, const std::vector<std::string>& names);

// The field of `schema` cheapest to read, for counting a record batch's
// rows: the first of fixed width, else the first (none where it has none).
std::vector<int> RowCountingField(const arrow::Schema& schema);

// A reader of `file` whose record batches hold the fields `fields` (their
// indices; empty: every one). `pool` allocates what is decoded.
arrow::Result<std::shared_ptr<arrow::ipc::RecordBatchFileReader>> OpenIpcFields(
    const std::shared_ptr<arrow::io::RandomAccessFile>& file, std::vector<int> fields, arrow::MemoryPool* pool);

}  // namespace sluice::io

#endif  // SLUICE_IO_ARROW_IPC_FIELDS_H_
