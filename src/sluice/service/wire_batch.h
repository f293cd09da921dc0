// A batch as one gRPC message without copying its tensors: BatchMessage's
// wire format written around the tensor memory, which travels as gRPC
// slices that keep the batch's buffers alive until sent. The client parses
// it as an ordinary BatchMessage. Written by hand because protobuf copies
// each tensor into a string and gRPC copies it again when serializing;
// measured with those copies, the streaming bench ran at 69% of a bare
// gRPC loop.
#ifndef SLUICE_SERVICE_WIRE_BATCH_H_
#define SLUICE_SERVICE_WIRE_BATCH_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/impl/serialization_traits.h>
#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"
#include "service.pb.h"
#include "sluice/core/batch.h"

namespace sluice::service {

// `header` carries the fields other than rows, columns, sample ids,
// compression and CRC, which come from `batch`. Compressed batches are
// serialized the ordinary way (compression copies anyway).
absl::StatusOr<grpc::ByteBuffer> EncodeWireBatch(const Batch& batch, const BatchMessage& header,
                                                 Compression compression);

// A marker or header-only message, serialized the ordinary way.
grpc::ByteBuffer SerializeMessage(const BatchMessage& message);

// A BatchMessage already serialized (by EncodeWireBatch or
// SerializeMessage), for a gRPC writer: handing it over copies no bytes.
struct WireBatch {
  grpc::ByteBuffer bytes;
};

}  // namespace sluice::service

namespace grpc {

template <>
class SerializationTraits<sluice::service::WireBatch, void> {
 public:
  static Status Serialize(const sluice::service::WireBatch& message, ByteBuffer* out, bool* own_buffer) {
    *out = message.bytes;  // shares the slices
    *own_buffer = true;
    return Status::OK;
  }
  static Status Deserialize(ByteBuffer*, sluice::service::WireBatch*) {
    return Status(StatusCode::UNIMPLEMENTED, "a WireBatch is only ever sent");
  }
};

}  // namespace grpc

#endif  // SLUICE_SERVICE_WIRE_BATCH_H_
