// A batch as one gRPC message without copying its tensors: BatchMessage's
// wire format written around the tensor memory, which travels as gRPC
// slices that keep the batch's buffers alive until sent. The client parses
// it as an ordinary BatchMessage. Written by hand because protobuf copies
// each tensor into a string and gRPC copies it again when serializing;
// measured with those copies, the streaming bench ran at 69% of a bare
// gRPC loop.
#ifndef SLUICE_SERVICE_WIRE_BATCH_H_
#define SLUICE_SERVICE_WIRE_BATCH_H_

#include <grpcpp/impl/serialization_traits.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"
#include "service.pb.h"
#include "sluice/core/batch.h"
#include "sluice/core/buffer_pool.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/receive_ops.h"

namespace sluice::service {

class ShmRing;
class ShmRingWriter;

// `header` carries the fields other than rows, columns, sample ids,
// compression and CRC, which come from `batch`. Compressed batches are
// serialized the ordinary way (compression copies anyway). Given `ring`
// (a client's on this host), the columns' bytes go into it when it has
// room; `*ring_bytes` (if given) says how many went there (0: none).
absl::StatusOr<grpc::ByteBuffer> EncodeWireBatch(const Batch& batch, const BatchMessage& header,
                                                 Compression compression, ShmRingWriter* ring = nullptr,
                                                 uint64_t* ring_bytes = nullptr);

// A marker or header-only message, serialized the ordinary way.
grpc::ByteBuffer SerializeMessage(const BatchMessage& message);

// A BatchMessage already serialized (by EncodeWireBatch or
// SerializeMessage), for a gRPC writer: handing it over copies no bytes.
struct WireBatch {
  grpc::ByteBuffer bytes;
};

// The receiving side: a BatchMessage parsed by hand out of gRPC's slices.
// Each column's data is copied once, into a buffer from `pool`, and the
// CRC is computed during that copy. Parsed as a BatchMessage by protobuf, a
// batch was copied into a freshly allocated string (new pages to fault in
// per message) and read again for the CRC: ~40% of the client's CPU.
// Given receive ops (uncompressed batches only), a column with an op is
// not copied but fed to its op piece by piece as gRPC holds it.
struct ReceivingBatch {
  BufferPool* pool = BufferPool::Default();  // set before reading
  const ReceiveOps* ops = nullptr;
  ShmRing* ring = nullptr;  // the stream's, if it offered one
  ReceivedBatch received;
  // Why the last message could not be parsed. gRPC's Read then returns
  // false as at the stream's end, but the call goes on: the reader must
  // cancel it, or wait forever for the worker's status.
  absl::Status error;
};

// DataLoss when `bytes` is not a well-formed BatchMessage. Columns whose
// bytes are in `ring` are views of it (or their receive op's output).
absl::Status ParseReceivedBatch(grpc::ByteBuffer* bytes, BufferPool* pool, const ReceiveOps* ops, ShmRing* ring,
                                ReceivedBatch* out);

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

template <>
class SerializationTraits<sluice::service::ReceivingBatch, void> {
 public:
  static Status Serialize(const sluice::service::ReceivingBatch&, ByteBuffer*, bool*) {
    return Status(StatusCode::UNIMPLEMENTED, "a ReceivingBatch is only ever received");
  }
  static Status Deserialize(ByteBuffer* bytes, sluice::service::ReceivingBatch* message) {
    message->error =
        sluice::service::ParseReceivedBatch(bytes, message->pool, message->ops, message->ring, &message->received);
    bytes->Clear();
    return message->error.ok() ? Status::OK : Status(StatusCode::INTERNAL, std::string(message->error.message()));
  }
};

}  // namespace grpc

#endif  // SLUICE_SERVICE_WIRE_BATCH_H_
