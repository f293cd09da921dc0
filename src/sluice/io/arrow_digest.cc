#include "sluice/io/arrow_digest.h"

#include <arrow/util/byte_size.h>

#include "absl/strings/str_format.h"
#include "sluice/io/crc32c.h"

namespace sluice::io {
namespace {

// Data up to this size is digested whole. Past it (a Hugging Face dataset's
// memory-mapped table of many GB, whose pages a digest would read from
// disk), each buffer's size and its first and last kEdgeBytes are.
constexpr int64_t kWholeBytes = int64_t{256} << 20;
constexpr int64_t kEdgeBytes = 256;

uint32_t ExtendWith(uint32_t crc, int64_t value) { return Crc32cExtend(crc, &value, sizeof(value)); }

uint32_t ExtendWithBuffer(uint32_t crc, const arrow::Buffer& buffer, bool whole) {
  const int64_t size = buffer.size();
  crc = ExtendWith(crc, size);
  if (whole || size <= 2 * kEdgeBytes) return Crc32cExtend(crc, buffer.data(), static_cast<size_t>(size));
  crc = Crc32cExtend(crc, buffer.data(), kEdgeBytes);
  return Crc32cExtend(crc, buffer.data() + size - kEdgeBytes, kEdgeBytes);
}

uint32_t ExtendWith(uint32_t crc, const arrow::ArrayData& data, bool whole) {
  crc = ExtendWith(ExtendWith(crc, data.offset), data.length);
  for (const std::shared_ptr<arrow::Buffer>& buffer : data.buffers) {
    crc = buffer == nullptr ? ExtendWith(crc, -1) : ExtendWithBuffer(crc, *buffer, whole);
  }
  for (const std::shared_ptr<arrow::ArrayData>& child : data.child_data) crc = ExtendWith(crc, *child, whole);
  if (data.dictionary != nullptr) crc = ExtendWith(crc, *data.dictionary, whole);
  return crc;
}

}  // namespace

std::string ArrowDigest(const arrow::Schema& schema, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  int64_t bytes = 0;
  for (const std::shared_ptr<arrow::RecordBatch>& batch : batches) {
    for (const std::shared_ptr<arrow::Array>& column : batch->columns()) {
      bytes += arrow::util::TotalBufferSize(*column);
    }
  }
  const bool whole = bytes <= kWholeBytes;
  const std::string described = schema.ToString();
  uint32_t crc = Crc32c(described.data(), described.size());
  int64_t rows = 0;
  for (const std::shared_ptr<arrow::RecordBatch>& batch : batches) {
    crc = ExtendWith(crc, batch->num_rows());
    rows += batch->num_rows();
    for (const std::shared_ptr<arrow::ArrayData>& column : batch->column_data()) crc = ExtendWith(crc, *column, whole);
  }
  return absl::StrFormat("%08x-%d", crc, rows);
}

}  // namespace sluice::io
