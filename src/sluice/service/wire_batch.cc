#include "sluice/service/wire_batch.h"

#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/crc32c.h"
#include "sluice/service/batch_codec.h"

namespace sluice::service {
namespace {

using google::protobuf::internal::WireFormatLite;

// BatchMessage.columns and TensorData.data: the two length-delimited fields
// written around the tensor bytes.
constexpr int kColumnsField = BatchMessage::kColumnsFieldNumber;
constexpr int kDataField = TensorData::kDataFieldNumber;

void AppendTagAndLength(int field, uint64_t length, std::string* out) {
  uint8_t buf[20];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), buf);
  end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(length, end);
  out->append(reinterpret_cast<const char*>(buf), end - buf);
}

size_t TagAndLengthSize(int field, uint64_t length) {
  std::string s;
  AppendTagAndLength(field, length, &s);
  return s.size();
}

grpc::Slice OwnedSlice(std::string bytes) {
  auto* owned = new std::string(std::move(bytes));
  return grpc::Slice(owned->data(), owned->size(), [](void* p) { delete static_cast<std::string*>(p); },
                     owned);
}

// A slice over tensor memory that holds the buffer until gRPC is done.
grpc::Slice BorrowedSlice(const Tensor& t, const uint8_t* data, size_t size) {
  auto* keep = new std::shared_ptr<Buffer>(t.buffer());
  return grpc::Slice(const_cast<uint8_t*>(data), size,
                     [](void* p) { delete static_cast<std::shared_ptr<Buffer>*>(p); }, keep);
}

}  // namespace

grpc::ByteBuffer SerializeMessage(const BatchMessage& message) {
  grpc::Slice slice = OwnedSlice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

absl::StatusOr<grpc::ByteBuffer> EncodeWireBatch(const Batch& batch, const BatchMessage& header,
                                                 Compression compression) {
  if (compression != COMPRESSION_NONE) {
    BatchMessage m = header;
    SLUICE_RETURN_IF_ERROR(EncodeBatch(batch, compression, &m));
    return SerializeMessage(m);
  }
  struct Part {
    const Tensor* tensor;
    const uint8_t* data;
    size_t size;
    std::string rest;  // TensorData's other fields
  };
  std::vector<Part> parts;
  uint32_t crc = 0;
  for (const Column& c : batch.columns) {
    Part p{&c.values, c.values.raw_data(), c.values.byte_size(), ""};
    TensorData rest;
    if (c.ragged()) {  // the rows' bytes, offsets rebased to 0
      const int64_t* off = c.offsets.data<int64_t>();
      p.data += off[0];
      p.size = static_cast<size_t>(off[batch.rows] - off[0]);
      std::string* offsets = rest.mutable_offsets();
      offsets->resize((batch.rows + 1) * sizeof(int64_t));
      int64_t* rebased = reinterpret_cast<int64_t*>(offsets->data());
      for (int64_t r = 0; r <= batch.rows; ++r) rebased[r] = off[r] - off[0];
    }
    rest.set_uncompressed_size(static_cast<int64_t>(p.size));
    crc = io::Crc32cExtend(crc, p.data, p.size);
    crc = io::Crc32cExtend(crc, rest.offsets().data(), rest.offsets().size());
    p.rest = rest.SerializeAsString();
    parts.push_back(std::move(p));
  }
  BatchMessage head = header;
  head.set_rows(batch.rows);
  head.set_compression(COMPRESSION_NONE);
  head.set_crc32c(crc);
  head.clear_columns();
  head.clear_sample_ids();
  head.mutable_sample_ids()->Reserve(static_cast<int>(batch.rows));
  for (int64_t r = 0; r < batch.rows; ++r) head.add_sample_ids(batch.provenance.SampleId(r));

  // Fields may come in any order: the header, then each column as
  // [columns tag+len][data tag+len][tensor bytes][offsets, size].
  std::vector<grpc::Slice> slices;
  slices.push_back(OwnedSlice(head.SerializeAsString()));
  for (const Part& p : parts) {
    const size_t column_size = TagAndLengthSize(kDataField, p.size) + p.size + p.rest.size();
    std::string prefix;
    AppendTagAndLength(kColumnsField, column_size, &prefix);
    AppendTagAndLength(kDataField, p.size, &prefix);
    slices.push_back(OwnedSlice(std::move(prefix)));
    if (p.size > 0) slices.push_back(BorrowedSlice(*p.tensor, p.data, p.size));
    slices.push_back(OwnedSlice(p.rest));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace sluice::service
