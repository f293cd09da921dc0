// Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
//
// Arrow IPC's file format (Arrow's format/File.fbs and format/Message.fbs):
// the file ends with a FlatBuffers `Footer`, its int32 length and "ARROW1".
// The footer's field 3, `recordBatches`, is a vector of `Block` structs
// {int64 offset; int32 metaDataLength; (4 bytes of padding) int64
// bodyLength}. A block's bytes start with the encapsulated message: 0xFFFFFFFF
// (absent before Arrow 0.15), an int32 size, then a FlatBuffers `Message`
// whose field 1 is the header's type (3: RecordBatch) and field 2 the
// header, a `RecordBatch` table whose field 0 is its int64 `length` and
// field 1 its `nodes`, a vector of `FieldNode` structs {int64 length; int64
// null_count}, the first of them the first column's.
#include "sluice/io/arrow_ipc_rows.h"

#include <arrow/buffer.h>

#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"

namespace sluice::io {
namespace {

constexpr char kMagic[] = "ARROW1";
constexpr int kFooterRecordBatches = 3;
constexpr int kMessageHeaderType = 1;
constexpr int kMessageHeader = 2;
constexpr uint8_t kRecordBatchHeader = 3;
constexpr int kRecordBatchLength = 0;
constexpr int kRecordBatchNodes = 1;
constexpr int64_t kBlockBytes = 24;
constexpr int64_t kMaxRows = int64_t{1} << 40;

// Little-endian values of a FlatBuffers buffer, each read checked against
// its bounds (a damaged footer is an error, never a read past the buffer).
class FlatBuffer {
 public:
  FlatBuffer(const uint8_t* data, int64_t size) : data_(data), size_(size) {}

  template <typename T>
  std::optional<T> Read(int64_t at) const {
    if (at < 0 || at > size_ - static_cast<int64_t>(sizeof(T))) return std::nullopt;
    T value;
    std::memcpy(&value, data_ + at, sizeof(T));
    return value;
  }
  // The root table's position.
  std::optional<int64_t> Root() const {
    const std::optional<uint32_t> root = Read<uint32_t>(0);
    return root ? std::optional<int64_t>(*root) : std::nullopt;
  }
  // Where field `id` of the table at `table` is; nullopt when it is
  // absent or the table is damaged.
  std::optional<int64_t> Field(int64_t table, int id) const {
    const std::optional<int32_t> back = Read<int32_t>(table);
    if (!back) return std::nullopt;
    const int64_t vtable = table - *back;
    const std::optional<uint16_t> vtable_size = Read<uint16_t>(vtable);
    if (!vtable_size || 4 + 2 * id + 2 > *vtable_size) return std::nullopt;
    const std::optional<uint16_t> offset = Read<uint16_t>(vtable + 4 + 2 * id);
    if (!offset || *offset == 0) return std::nullopt;
    return table + *offset;
  }
  // What the offset stored at `at` (a table or a vector field) points to.
  std::optional<int64_t> Follow(int64_t at) const {
    const std::optional<uint32_t> offset = Read<uint32_t>(at);
    return offset ? std::optional<int64_t>(at + *offset) : std::nullopt;
  }

 private:
  const uint8_t* data_;
  int64_t size_;
};

// The footer's blocks: the batches without their rows.
absl::StatusOr<std::vector<IpcRecordBatch>> RecordBatchBlocks(arrow::io::RandomAccessFile& file,
                                                              const std::string& path) {
  const auto damaged = [&path](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": the Arrow IPC footer is damaged (", what, ")"));
  };
  const arrow::Result<int64_t> size = file.GetSize();
  if (!size.ok() || *size < 10) return damaged("the file is too short");
  const arrow::Result<std::shared_ptr<arrow::Buffer>> tail = file.ReadAt(*size - 10, 10);
  if (!tail.ok() || (*tail)->size() != 10 || std::memcmp((*tail)->data() + 4, kMagic, 6) != 0) {
    return damaged("no ARROW1 at its end");
  }
  int32_t footer_size;
  std::memcpy(&footer_size, (*tail)->data(), 4);
  if (footer_size <= 0 || footer_size > *size - 10) return damaged("its length is out of the file");
  const arrow::Result<std::shared_ptr<arrow::Buffer>> read = file.ReadAt(*size - 10 - footer_size, footer_size);
  if (!read.ok()) return damaged(read.status().ToString());
  const FlatBuffer footer((*read)->data(), (*read)->size());
  const std::optional<int64_t> root = footer.Root();
  const std::optional<int64_t> field = root ? footer.Field(*root, kFooterRecordBatches) : std::nullopt;
  std::vector<IpcRecordBatch> blocks;
  if (!field) return blocks;  // no record batches
  const std::optional<int64_t> vector = footer.Follow(*field);
  const std::optional<uint32_t> count = vector ? footer.Read<uint32_t>(*vector) : std::nullopt;
  if (!count || *count > footer_size / kBlockBytes) return damaged("its record batches' vector");
  for (int64_t i = 0; i < *count; ++i) {
    const int64_t at = *vector + 4 + i * kBlockBytes;
    const std::optional<int64_t> offset = footer.Read<int64_t>(at);
    const std::optional<int32_t> length = footer.Read<int32_t>(at + 8);
    const std::optional<int64_t> body = footer.Read<int64_t>(at + 16);
    if (!offset || !length || !body || *offset < 0 || *length < 8 || *body < 0 || *offset > *size - *length ||
        *body > *size - *offset - *length) {
      return damaged(absl::StrCat("record batch ", i, "'s block"));
    }
    blocks.push_back(IpcRecordBatch{*offset, *length, *body, 0});
  }
  return blocks;
}

// The length of the record batch whose message is `metadata` (the block's
// first metadata_length bytes).
std::optional<int64_t> RecordBatchLength(const arrow::Buffer& metadata) {
  const FlatBuffer prefix(metadata.data(), metadata.size());
  const std::optional<uint32_t> first = prefix.Read<uint32_t>(0);
  if (!first) return std::nullopt;
  const int64_t start = *first == 0xFFFFFFFFu ? 8 : 4;  // the continuation marker, then the size
  const std::optional<int32_t> size = prefix.Read<int32_t>(start - 4);
  if (!size || *size <= 0 || *size > metadata.size() - start) return std::nullopt;
  const FlatBuffer message(metadata.data() + start, *size);
  const std::optional<int64_t> root = message.Root();
  const std::optional<int64_t> type_at = root ? message.Field(*root, kMessageHeaderType) : std::nullopt;
  const std::optional<uint8_t> type = type_at ? message.Read<uint8_t>(*type_at) : std::nullopt;
  if (!type || *type != kRecordBatchHeader) return std::nullopt;
  const std::optional<int64_t> header_at = message.Field(*root, kMessageHeader);
  const std::optional<int64_t> header = header_at ? message.Follow(*header_at) : std::nullopt;
  if (!header) return std::nullopt;
  const std::optional<int64_t> length_at = message.Field(*header, kRecordBatchLength);
  // A field left at its default: an empty batch.
  const std::optional<int64_t> length = length_at ? message.Read<int64_t>(*length_at) : std::optional<int64_t>(0);
  if (!length || *length < 0) return std::nullopt;
  // The first column's length says it again: a damaged header that reads
  // as an empty batch would list none of its rows, and it is never read.
  const std::optional<int64_t> nodes_at = message.Field(*header, kRecordBatchNodes);
  const std::optional<int64_t> nodes = nodes_at ? message.Follow(*nodes_at) : std::nullopt;
  const std::optional<uint32_t> count = nodes ? message.Read<uint32_t>(*nodes) : std::nullopt;
  if (!count) return std::nullopt;
  if (*count == 0) return length;  // a batch of no columns
  const std::optional<int64_t> first_column = message.Read<int64_t>(*nodes + 4);
  return first_column == length ? length : std::nullopt;
}

}  // namespace

absl::StatusOr<std::vector<IpcRecordBatch>> IpcRecordBatches(arrow::io::RandomAccessFile& file,
                                                             const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<IpcRecordBatch> blocks, RecordBatchBlocks(file, path));
  int64_t total = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const arrow::Result<std::shared_ptr<arrow::Buffer>> metadata =
        file.ReadAt(blocks[i].offset, blocks[i].metadata_length);
    std::optional<int64_t> length;
    if (metadata.ok() && (*metadata)->size() == blocks[i].metadata_length) length = RecordBatchLength(**metadata);
    if (!length) {
      return absl::DataLossError(
          absl::StrCat("record batch ", i, " of ", path, ": its header at offset ", blocks[i].offset, " is damaged (",
                       metadata.ok() ? "not a record batch's, or its rows differ from its first column's"
                                     : metadata.status().ToString(),
                       ")"));
    }
    // A row's identity holds its record in 40 bits (batch.h): a header
    // claiming more is damage, found before any sum overflows.
    if (*length > kMaxRows - total) {
      return absl::DataLossError(absl::StrCat("record batch ", i, " of ", path, ": its header claims ", *length,
                                              " rows, past the ", kMaxRows, " a file may hold"));
    }
    total += *length;
    blocks[i].rows = *length;
  }
  return blocks;
}

}  // namespace sluice::io
