#include "sluice/io/arrow_digest.h"

#include "absl/strings/str_format.h"
#include "sluice/io/crc32c.h"

namespace sluice::io {
namespace {

uint32_t ExtendWith(uint32_t crc, int64_t value) { return Crc32cExtend(crc, &value, sizeof(value)); }

uint32_t ExtendWith(uint32_t crc, const arrow::ArrayData& data) {
  crc = ExtendWith(ExtendWith(crc, data.offset), data.length);
  for (const std::shared_ptr<arrow::Buffer>& buffer : data.buffers) {
    if (buffer == nullptr) {
      crc = ExtendWith(crc, -1);
      continue;
    }
    crc = Crc32cExtend(ExtendWith(crc, buffer->size()), buffer->data(), static_cast<size_t>(buffer->size()));
  }
  for (const std::shared_ptr<arrow::ArrayData>& child : data.child_data) crc = ExtendWith(crc, *child);
  if (data.dictionary != nullptr) crc = ExtendWith(crc, *data.dictionary);
  return crc;
}

}  // namespace

std::string ArrowDigest(const arrow::Schema& schema, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  const std::string described = schema.ToString();
  uint32_t crc = Crc32c(described.data(), described.size());
  int64_t rows = 0;
  for (const std::shared_ptr<arrow::RecordBatch>& batch : batches) {
    crc = ExtendWith(crc, batch->num_rows());
    rows += batch->num_rows();
    for (const std::shared_ptr<arrow::ArrayData>& column : batch->column_data()) crc = ExtendWith(crc, *column);
  }
  return absl::StrFormat("%08x-%d", crc, rows);
}

}  // namespace sluice::io
