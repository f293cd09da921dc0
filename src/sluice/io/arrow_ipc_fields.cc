// Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
#include "sluice/io/arrow_ipc_fields.h"

#include <arrow/type.h>
#include <arrow/type_traits.h>

#include <algorithm>

namespace sluice::io {

std::vector<int> FieldsNamed(const arrow::Schema& schema, const std::vector<std::string>& names) {
  std::vector<int> fields;
  for (int i = 0; i < schema.num_fields(); ++i) {
    if (std::find(names.begin(), names.end(), schema.field(i)->name()) != names.end()) fields.push_back(i);
  }
  if (static_cast<int>(fields.size()) == schema.num_fields()) fields.clear();
  return fields;
}

std::vector<int> RowCountingField(const arrow::Schema& schema) {
  for (int i = 0; i < schema.num_fields(); ++i) {
    if (arrow::is_fixed_width(*schema.field(i)->type())) return {i};
  }
  return schema.num_fields() > 0 ? std::vector<int>{0} : std::vector<int>{};
}

arrow::Result<std::shared_ptr<arrow::ipc::RecordBatchFileReader>> OpenIpcFields(
    const std::shared_ptr<arrow::io::RandomAccessFile>& file, std::vector<int> fields, arrow::MemoryPool* pool) {
  arrow::ipc::IpcReadOptions options;
  options.memory_pool = pool;
  options.included_fields = std::move(fields);
  return arrow::ipc::RecordBatchFileReader::Open(file, options);
}

}  // namespace sluice::io
