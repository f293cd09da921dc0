#include "sluice/service/batch_codec.h"

#include <lz4.h>
#include <zstd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/crc32c.h"
#include "sluice/service/channel.h"

namespace sluice::service {
namespace {

// Level 1: the fastest, what a stream that must keep up with training wants.
constexpr int kZstdLevel = 1;

absl::Status Compress(Compression c, const uint8_t* data, size_t size, std::string* out) {
  if (c == COMPRESSION_ZSTD) {
    out->resize(ZSTD_compressBound(size));
    const size_t n = ZSTD_compress(out->data(), out->size(), data, size, kZstdLevel);
    if (ZSTD_isError(n)) return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
    out->resize(n);
  } else if (c == COMPRESSION_LZ4) {
    out->resize(LZ4_compressBound(static_cast<int>(size)));
    const int n = LZ4_compress_default(reinterpret_cast<const char*>(data), out->data(), static_cast<int>(size),
                                       static_cast<int>(out->size()));
    if (n <= 0) return absl::InternalError("lz4: compression failed");
    out->resize(n);
  } else {
    out->assign(reinterpret_cast<const char*>(data), size);
  }
  return absl::OkStatus();
}

absl::Status Decompress(Compression c, const uint8_t* in, size_t in_size, uint8_t* out, size_t size,
                        const std::string& where) {
  size_t got = 0;
  if (c == COMPRESSION_ZSTD) {
    got = ZSTD_decompress(out, size, in, in_size);
    if (ZSTD_isError(got)) return absl::DataLossError(absl::StrCat(where, ": zstd: ", ZSTD_getErrorName(got)));
  } else if (c == COMPRESSION_LZ4) {
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in), reinterpret_cast<char*>(out),
                                      static_cast<int>(in_size), static_cast<int>(size));
    if (n < 0) return absl::DataLossError(absl::StrCat(where, ": lz4 data is corrupt"));
    got = static_cast<size_t>(n);
  } else {
    return absl::DataLossError(absl::StrCat(where, ": unknown compression ", static_cast<int>(c)));
  }
  if (got != size) {
    return absl::DataLossError(absl::StrCat(where, ": ", got, " bytes, expected ", size));
  }
  return absl::OkStatus();
}

uint32_t MessageCrc(const BatchMessage& m) {
  uint32_t crc = 0;
  for (const TensorData& t : m.columns()) {
    crc = io::Crc32cExtend(crc, t.data().data(), t.data().size());
    crc = io::Crc32cExtend(crc, t.offsets().data(), t.offsets().size());
  }
  return crc;
}

}  // namespace

absl::StatusOr<Compression> ParseCompression(const std::string& name) {
  if (name.empty() || name == "none") return COMPRESSION_NONE;
  if (name == "zstd") return COMPRESSION_ZSTD;
  if (name == "lz4") return COMPRESSION_LZ4;
  return absl::InvalidArgumentError(absl::StrCat("compression must be \"\", \"zstd\" or \"lz4\", got \"", name, "\""));
}

absl::Status EncodeBatch(const Batch& batch, Compression compression, BatchMessage* out) {
  out->set_rows(batch.rows);
  out->set_compression(compression);
  out->clear_columns();
  for (const Column& c : batch.columns) {
    TensorData* t = out->add_columns();
    if (c.ragged()) {  // rows' bytes, offsets rebased to 0
      const int64_t* off = c.offsets.data<int64_t>();
      const size_t size = off[batch.rows] - off[0];
      SLUICE_RETURN_IF_ERROR(Compress(compression, c.values.raw_data() + off[0], size, t->mutable_data()));
      t->set_uncompressed_size(static_cast<int64_t>(size));
      std::string* offsets = t->mutable_offsets();
      offsets->resize((batch.rows + 1) * sizeof(int64_t));
      int64_t* rebased = reinterpret_cast<int64_t*>(offsets->data());
      for (int64_t r = 0; r <= batch.rows; ++r) rebased[r] = off[r] - off[0];
    } else {
      SLUICE_RETURN_IF_ERROR(Compress(compression, c.values.raw_data(), c.values.byte_size(), t->mutable_data()));
      t->set_uncompressed_size(static_cast<int64_t>(c.values.byte_size()));
    }
  }
  out->clear_sample_ids();
  out->mutable_sample_ids()->Reserve(static_cast<int>(batch.rows));
  for (int64_t r = 0; r < batch.rows; ++r) out->add_sample_ids(batch.provenance.SampleId(r));
  out->set_crc32c(MessageCrc(*out));
  return absl::OkStatus();
}

ReceivedBatch Received(BatchMessage message) {
  ReceivedBatch out;
  out.crc = MessageCrc(message);
  for (TensorData& t : *message.mutable_columns()) {
    auto bytes = std::make_shared<std::string>(std::move(*t.mutable_data()));
    t.clear_data();
    out.wire_bytes += static_cast<int64_t>(bytes->size());
    out.data.emplace_back(DType::kUInt8, Shape{static_cast<int64_t>(bytes->size())},
                          Buffer::Adopt(reinterpret_cast<uint8_t*>(bytes->data()), bytes->size(), bytes));
    out.ran.push_back(false);
  }
  out.header = std::move(message);
  return out;
}

namespace {

// The byte count of column `spec` in a batch of `rows` as sent; DataLoss
// for a count no batch carries or one that does not fit the rows. Every
// size is checked before anything is allocated from it: a forged one must
// be an error, never an allocation of what it claims.
absl::StatusOr<int64_t> ColumnBytes(const ColumnSpec& spec, const TensorData& t, int64_t rows,
                                    const std::string& where) {
  if (t.uncompressed_size() < 0 || t.uncompressed_size() > kMaxMessageBytes) {
    return absl::DataLossError(
        absl::StrCat(where, ": claims ", t.uncompressed_size(), " bytes; a batch carries 0 to ", kMaxMessageBytes));
  }
  if (spec.ragged) return t.uncompressed_size();
  int64_t bytes = 0;
  const int64_t row_bytes = spec.shape.num_elements() * static_cast<int64_t>(DTypeSize(spec.dtype));
  if (__builtin_mul_overflow(rows, row_bytes, &bytes) || bytes != t.uncompressed_size()) {
    return absl::DataLossError(
        absl::StrCat(where, ": ", t.uncompressed_size(), " bytes for ", rows, " rows of ", spec.ToString()));
  }
  return bytes;
}

// A ragged column's offsets, checked to span its data in order.
absl::StatusOr<Tensor> RaggedOffsets(const TensorData& t, int64_t rows, BufferPool* pool, const std::string& where) {
  if (t.offsets().size() != (rows + 1) * sizeof(int64_t)) {
    return absl::DataLossError(absl::StrCat(where, ": wrong offsets size"));
  }
  Tensor offsets = Tensor::Allocate(DType::kInt64, Shape{rows + 1}, pool);
  std::memcpy(offsets.raw_data(), t.offsets().data(), t.offsets().size());
  const int64_t* off = offsets.data<int64_t>();
  if (off[0] != 0 || off[rows] != t.uncompressed_size()) {
    return absl::DataLossError(absl::StrCat(where, ": offsets do not span the data"));
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (off[r + 1] < off[r]) return absl::DataLossError(absl::StrCat(where, ": offsets go backwards at row ", r + 1));
  }
  return offsets;
}

// Column i's values: converted on receipt (the receive op ran on the
// arriving bytes), the bytes as sent, or decompressed; then, for a
// compressed column with a receive op, converted.
absl::StatusOr<Tensor> ColumnValues(const ReceivedBatch& message, size_t i, const ColumnSpec& spec, int64_t bytes,
                                    BufferPool* pool, const ReceiveOps* ops, const std::string& where) {
  const BatchMessage& m = message.header;
  const bool plain = m.compression() == COMPRESSION_NONE;
  const Tensor& sent = message.data[i];
  const ReceiveOp* op = ops != nullptr ? ops->For(static_cast<int>(i)) : nullptr;
  const bool ran = message.ran[i];
  if (ran && (op == nullptr || !plain)) {
    return absl::DataLossError(
        absl::StrCat(where, ": converted on receipt, but ", op == nullptr ? "has no receive op" : "compressed"));
  }
  if (ran) {
    const int64_t out_bytes = m.rows() * op->out_row_bytes;  // rows were checked against the bytes sent
    if (sent.byte_size() != static_cast<size_t>(out_bytes)) {
      return absl::DataLossError(absl::StrCat(where, ": ", sent.byte_size(), " bytes converted, expected ", out_bytes));
    }
    return Tensor(op->out.dtype, op->out.shape.WithLeading(m.rows()), sent.buffer());
  }
  const DType dtype = spec.ragged ? DType::kUInt8 : spec.dtype;
  const Shape shape = spec.ragged ? Shape{bytes} : spec.shape.WithLeading(m.rows());
  Tensor values;
  if (plain) {
    if (sent.byte_size() != static_cast<size_t>(bytes)) {
      return absl::DataLossError(absl::StrCat(where, ": ", sent.byte_size(), " bytes, expected ", bytes));
    }
    values = Tensor(dtype, shape, sent.buffer());
  } else {
    values = Tensor::Allocate(dtype, shape, pool);
    SLUICE_RETURN_IF_ERROR(
        Decompress(m.compression(), sent.raw_data(), sent.byte_size(), values.raw_data(), values.byte_size(), where));
  }
  if (op == nullptr) return values;
  Tensor converted = Tensor::Allocate(op->out.dtype, op->out.shape.WithLeading(m.rows()), pool);
  SLUICE_RETURN_IF_ERROR(op->Run(values.raw_data(), m.rows(), converted.raw_data()));
  return converted;
}

// The batch's provenance from its sample ids: a run per stretch of
// consecutive records of one file.
Provenance ProvenanceOf(const BatchMessage& m, std::shared_ptr<const std::vector<std::string>> files) {
  Provenance provenance(std::move(files));
  for (int64_t r = 0; r < m.rows(); ++r) {
    const int64_t id = m.sample_ids(static_cast<int>(r));
    const bool continues =
        r > 0 && id >= 0 && m.sample_ids(static_cast<int>(r - 1)) == id - 1 && (id >> 40) == ((id - 1) >> 40);
    if (!continues) {
      provenance.AddRun(r, id < 0 ? -1 : static_cast<int32_t>(id >> 40), id < 0 ? -1 : id & ((int64_t{1} << 40) - 1));
    }
  }
  return provenance;
}

}  // namespace

absl::StatusOr<Batch> DecodeBatch(ReceivedBatch message, const Schema& schema,
                                  std::shared_ptr<const std::vector<std::string>> files, BufferPool* pool,
                                  const ReceiveOps* ops) {
  const BatchMessage& m = message.header;
  if (message.crc != m.crc32c()) {
    return absl::DataLossError(absl::StrCat("batch of split ", m.split(), ": CRC32C mismatch"));
  }
  if (m.columns_size() != static_cast<int>(schema.columns().size()) || message.data.size() != schema.columns().size() ||
      message.ran.size() != message.data.size() || m.rows() < 0 || m.sample_ids_size() != m.rows()) {
    return absl::DataLossError(absl::StrCat("batch of split ", m.split(), ": ", m.columns_size(), " columns and ",
                                            m.sample_ids_size(), " ids for ", m.rows(), " rows; expected ",
                                            schema.columns().size(), " columns"));
  }
  Batch batch;
  batch.rows = m.rows();
  for (size_t i = 0; i < schema.columns().size(); ++i) {
    const ColumnSpec& spec = schema.columns()[i];
    const TensorData& t = m.columns(static_cast<int>(i));
    const std::string where = absl::StrCat("batch of split ", m.split(), ", column '", spec.name, "'");
    SLUICE_ASSIGN_OR_RETURN(const int64_t bytes, ColumnBytes(spec, t, m.rows(), where));
    Column column;
    if (spec.ragged) {
      SLUICE_ASSIGN_OR_RETURN(column.offsets, RaggedOffsets(t, m.rows(), pool, where));
    }
    SLUICE_ASSIGN_OR_RETURN(column.values, ColumnValues(message, i, spec, bytes, pool, ops, where));
    batch.columns.push_back(std::move(column));
  }
  batch.provenance = ProvenanceOf(m, std::move(files));
  return batch;
}

}  // namespace sluice::service
