#include "sluice/service/wire_batch.h"

#include <grpcpp/support/proto_buffer_reader.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/crc32c.h"
#include "sluice/kernels/value_loops.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/shm_ring.h"

namespace sluice::service {
namespace {

using google::protobuf::internal::WireFormatLite;

// BatchMessage.columns and TensorData.data: the two length-delimited fields
// written around the tensor bytes.
constexpr int kColumnsField = BatchMessage::kColumnsFieldNumber;
constexpr int kDataField = TensorData::kDataFieldNumber;
// How long a worker waits for its consumer to give back room in the ring
// before sending a batch over TCP: longer than a trainer's usual step, so
// that a consumer slower than the worker paces it through the ring.
constexpr absl::Duration kRingPatience = absl::Seconds(1);

void AppendTagAndLength(int field, uint64_t length, std::string* out) {
  uint8_t buf[20];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), buf);
  end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(length, end);
  out->append(reinterpret_cast<const char*>(buf), end - buf);
}

// A column's bytes in the shared-memory ring, padded so that each column
// starts on a cache line (kernels load whole vectors).
uint64_t RingSpan(size_t bytes) { return (bytes + 63) / 64 * 64; }

size_t TagAndLengthSize(int field, uint64_t length) {
  std::string s;
  AppendTagAndLength(field, length, &s);
  return s.size();
}

grpc::Slice OwnedSlice(std::string bytes) {
  auto* owned = new std::string(std::move(bytes));
  return grpc::Slice(owned->data(), owned->size(), [](void* p) { delete static_cast<std::string*>(p); }, owned);
}

// A slice over tensor memory that holds the buffer until gRPC is done.
grpc::Slice BorrowedSlice(const Tensor& t, const uint8_t* data, size_t size) {
  auto* keep = new std::shared_ptr<Buffer>(t.buffer());
  return grpc::Slice(
      const_cast<uint8_t*>(data), size, [](void* p) { delete static_cast<std::shared_ptr<Buffer>*>(p); }, keep);
}

}  // namespace

grpc::ByteBuffer SerializeMessage(const BatchMessage& message) {
  grpc::Slice slice = OwnedSlice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

absl::StatusOr<grpc::ByteBuffer> EncodeWireBatch(const Batch& batch, const BatchMessage& header,
                                                 Compression compression, ShmRingWriter* ring,
                                                 uint64_t* ring_bytes_out) {
  if (ring_bytes_out != nullptr) *ring_bytes_out = 0;
  if (compression != COMPRESSION_NONE) {
    BatchMessage m = header;
    SLUICE_RETURN_IF_ERROR(EncodeBatch(batch, compression, &m));
    return SerializeMessage(m);
  }
  struct Part {
    const Tensor* tensor;
    const uint8_t* data;
    size_t size;
    TensorData rest;  // the other fields
    bool in_ring = false;
  };
  std::vector<Part> parts;
  uint64_t ring_bytes = 0;
  for (const Column& c : batch.columns) {
    Part p{&c.values, c.values.raw_data(), c.values.byte_size(), {}};
    if (c.ragged()) {  // the rows' bytes, offsets rebased to 0
      const int64_t* off = c.offsets.data<int64_t>();
      p.data += off[0];
      p.size = static_cast<size_t>(off[batch.rows] - off[0]);
      std::string* offsets = p.rest.mutable_offsets();
      offsets->resize((batch.rows + 1) * sizeof(int64_t));
      int64_t* rebased = reinterpret_cast<int64_t*>(offsets->data());
      for (int64_t r = 0; r <= batch.rows; ++r) rebased[r] = off[r] - off[0];
    }
    p.rest.set_uncompressed_size(static_cast<int64_t>(p.size));
    ring_bytes += RingSpan(p.size);
    parts.push_back(std::move(p));
  }
  const std::optional<uint64_t> ring_at =
      ring != nullptr ? ring->ReserveWithin(ring_bytes, kRingPatience) : std::nullopt;
  uint32_t crc = 0;
  uint64_t position = ring_at.value_or(0);
  for (Part& p : parts) {
    if (ring_at) {  // in the ring, the bytes are not sent: no CRC over them
      kernels::CopyBypassingCache(ring->At(position), p.data, p.size);  // the client reads it later, in its process
      p.rest.set_shm_position(position);
      position += RingSpan(p.size);
      p.size = 0;
      p.in_ring = true;
    }
    crc = io::Crc32cExtend(crc, p.data, p.size);
    crc = io::Crc32cExtend(crc, p.rest.offsets().data(), p.rest.offsets().size());
  }
  BatchMessage head = header;
  head.set_rows(batch.rows);
  head.set_compression(COMPRESSION_NONE);
  head.set_crc32c(crc);
  if (ring_at) {
    head.set_shm_end(*ring_at + ring_bytes);
    if (ring_bytes_out != nullptr) *ring_bytes_out = ring_bytes;
  }
  head.clear_columns();
  head.clear_sample_ids();
  head.mutable_sample_ids()->Reserve(static_cast<int>(batch.rows));
  for (int64_t r = 0; r < batch.rows; ++r) head.add_sample_ids(batch.provenance.SampleId(r));

  // Fields may come in any order: the header, then each column as
  // [columns tag+len][data tag+len][tensor bytes][offsets, size, ring
  // position] (a column in the ring has no data field).
  std::vector<grpc::Slice> slices;
  slices.push_back(OwnedSlice(head.SerializeAsString()));
  for (const Part& p : parts) {
    std::string rest = p.rest.SerializeAsString();
    const size_t data_size = p.in_ring ? 0 : TagAndLengthSize(kDataField, p.size) + p.size;
    std::string prefix;
    AppendTagAndLength(kColumnsField, data_size + rest.size(), &prefix);
    if (!p.in_ring) AppendTagAndLength(kDataField, p.size, &prefix);
    slices.push_back(OwnedSlice(std::move(prefix)));
    if (p.size > 0) slices.push_back(BorrowedSlice(*p.tensor, p.data, p.size));
    slices.push_back(OwnedSlice(std::move(rest)));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

namespace {

using google::protobuf::io::CodedInputStream;

absl::Status Malformed(const char* what) {
  return absl::DataLossError(absl::StrCat("malformed batch message: ", what));
}

// TensorData's fields; `data` is copied into a pooled buffer with its CRC,
// or, given the column's receive op, is that op's output, written as the
// bytes arrive (`*ran` set).
absl::Status ParseTensorData(CodedInputStream* in, BufferPool* pool, const ReceiveOp* op, TensorData* header,
                             Tensor* data, uint32_t* crc, bool* ran) {
  bool have_data = false;
  while (const uint32_t tag = in->ReadTag()) {
    switch (WireFormatLite::GetTagFieldNumber(tag)) {
      case TensorData::kDataFieldNumber: {
        uint32_t size = 0;
        if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED ||
            !in->ReadVarint32(&size) || have_data || !header->offsets().empty() || header->has_shm_position()) {
          return Malformed("column data");  // the CRC runs over data, then offsets
        }
        // Before allocating: a forged size must not cost its memory.
        if (static_cast<int64_t>(size) > in->BytesUntilLimit()) {
          return absl::DataLossError(absl::StrCat("malformed batch message: column data claims ", size,
                                                  " bytes, the column holds ", in->BytesUntilLimit()));
        }
        if (op != nullptr && size % op->in_row_bytes != 0) {
          return absl::DataLossError(absl::StrCat("malformed batch message: column data of ", size,
                                                  " bytes is no whole number of ", op->in_row_bytes, "-byte rows"));
        }
        const int64_t out_bytes = op != nullptr ? size / op->in_row_bytes * op->out_row_bytes : size;
        *data = Tensor::Allocate(DType::kUInt8, Shape{out_bytes}, pool);
        uint8_t* out = data->raw_data();
        std::optional<ReceiveRows> rows;
        if (op != nullptr) rows.emplace(*op, out);
        while (size > 0) {
          const void* chunk = nullptr;
          int available = 0;
          if (!in->GetDirectBufferPointer(&chunk, &available) || available <= 0) {
            return Malformed("column data truncated");
          }
          const uint32_t n = std::min<uint32_t>(size, static_cast<uint32_t>(available));
          if (rows) {
            *crc = io::Crc32cExtend(*crc, chunk, n);
            SLUICE_RETURN_IF_ERROR(rows->Feed(static_cast<const uint8_t*>(chunk), n));
          } else {
            *crc = io::CopyAndCrc32c(*crc, out, chunk, n);
            out += n;
          }
          in->Skip(static_cast<int>(n));
          size -= n;
        }
        have_data = true;
        *ran = op != nullptr;
        break;
      }
      case TensorData::kOffsetsFieldNumber:
        if (!WireFormatLite::ReadBytes(in, header->mutable_offsets())) return Malformed("offsets");
        *crc = io::Crc32cExtend(*crc, header->offsets().data(), header->offsets().size());
        break;
      case TensorData::kShmPositionFieldNumber: {  // the data is in the ring: ParseReceivedBatch views it
        uint64_t v = 0;
        if (have_data || !in->ReadVarint64(&v)) return Malformed("shared-memory position");
        header->set_shm_position(v);
        break;
      }
      case TensorData::kUncompressedSizeFieldNumber: {
        uint64_t v = 0;
        if (!in->ReadVarint64(&v)) return Malformed("uncompressed size");
        header->set_uncompressed_size(static_cast<int64_t>(v));
        break;
      }
      default:
        if (!WireFormatLite::SkipField(in, tag)) return Malformed("unknown column field");
    }
  }
  if (!have_data && !header->has_shm_position()) *data = Tensor::Allocate(DType::kUInt8, Shape{0}, pool);
  return absl::OkStatus();
}

// The columns of `out` whose bytes are in `ring`: each a view of it, or,
// given its receive op, the op's output (and the ring's bytes given back
// with the message).
absl::Status ViewRing(ShmRing* ring, const ReceiveOps* ops, BufferPool* pool, ReceivedBatch* out) {
  const BatchMessage& m = out->header;
  std::shared_ptr<void> lease;
  for (int i = 0; i < m.columns_size(); ++i) {
    const TensorData& t = m.columns(i);
    if (!t.has_shm_position()) continue;
    if (ring == nullptr) return Malformed("a column in shared memory on a stream without a ring");
    if (lease == nullptr) {
      SLUICE_ASSIGN_OR_RETURN(lease, ring->Hold(m.shm_end()));
    }
    const uint64_t size = static_cast<uint64_t>(t.uncompressed_size());
    SLUICE_ASSIGN_OR_RETURN(uint8_t* bytes, ring->At(t.shm_position(), size, m.shm_end()));
    const ReceiveOp* op = ops != nullptr ? ops->For(i) : nullptr;
    if (op == nullptr) {
      out->data[i] = Tensor(DType::kUInt8, Shape{static_cast<int64_t>(size)}, Buffer::Adopt(bytes, size, lease));
    } else {
      if (size % op->in_row_bytes != 0) return Malformed("shared-memory column of no whole number of rows");
      const int64_t rows = static_cast<int64_t>(size) / op->in_row_bytes;
      out->data[i] = Tensor::Allocate(DType::kUInt8, Shape{rows * op->out_row_bytes}, pool);
      SLUICE_RETURN_IF_ERROR(op->Run(bytes, rows, out->data[i].raw_data()));
      out->ran[i] = true;
    }
    out->wire_bytes += static_cast<int64_t>(size);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseReceivedBatch(grpc::ByteBuffer* bytes, BufferPool* pool, const ReceiveOps* ops, ShmRing* ring,
                                ReceivedBatch* out) {
  *out = ReceivedBatch();
  grpc::ProtoBufferReader reader(bytes);
  CodedInputStream in(&reader);
  // Fields other than the columns are gathered, still serialized, and parsed
  // by protobuf at the end: they are small.
  std::string rest;
  {
    google::protobuf::io::StringOutputStream rest_stream(&rest);
    google::protobuf::io::CodedOutputStream rest_out(&rest_stream);
    while (const uint32_t tag = in.ReadTag()) {
      if (WireFormatLite::GetTagFieldNumber(tag) != kColumnsField) {
        if (!WireFormatLite::SkipField(&in, tag, &rest_out)) return Malformed("field");
        continue;
      }
      uint32_t size = 0;
      if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED || !in.ReadVarint32(&size)) {
        return Malformed("column");
      }
      const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(size));
      TensorData column;
      Tensor data;
      bool ran = false;
      const ReceiveOp* op = ops != nullptr ? ops->For(static_cast<int>(out->data.size())) : nullptr;
      SLUICE_RETURN_IF_ERROR(ParseTensorData(&in, pool, op, &column, &data, &out->crc, &ran));
      if (!in.ConsumedEntireMessage()) return Malformed("column");
      in.PopLimit(limit);
      *out->header.add_columns() = std::move(column);
      out->data.push_back(std::move(data));
      out->ran.push_back(ran);
      out->wire_bytes += static_cast<int64_t>(size);
    }
    if (!in.ConsumedEntireMessage()) return Malformed("trailing bytes");
  }
  BatchMessage fields;
  if (!fields.ParseFromString(rest)) return Malformed("header");
  fields.mutable_columns()->Swap(out->header.mutable_columns());
  out->header = std::move(fields);
  return ViewRing(ring, ops, pool, out);
}

}  // namespace sluice::service
