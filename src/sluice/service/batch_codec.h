// Batches on the wire: a BatchMessage per chunk of rows, each column's bytes
// as they are in memory (uint8 stays uint8), optionally zstd- or
// lz4-compressed, with a CRC32C over what is sent and each row's sample
// identity.
#ifndef SLUICE_SERVICE_BATCH_CODEC_H_
#define SLUICE_SERVICE_BATCH_CODEC_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service.pb.h"
#include "sluice/core/batch.h"
#include "sluice/core/buffer_pool.h"
#include "sluice/core/schema.h"
#include "sluice/core/tensor.h"
#include "sluice/service/receive_ops.h"

namespace sluice::service {

// Fills `out`'s rows, columns, sample ids, compression and CRC (the other
// fields are the caller's).
absl::Status EncodeBatch(const Batch& batch, Compression compression, BatchMessage* out);

// A BatchMessage as received: the columns' data apart from the rest, in
// buffers of their own, with the CRC32C computed over the data and offsets
// as they arrived (the client's parser, ParseReceivedBatch, does both while
// copying each column once out of gRPC's buffers).
struct ReceivedBatch {
  BatchMessage header;       // every field but the columns' data
  std::vector<Tensor> data;  // per column, uint8 [bytes] at offset 0 of its buffer, as sent
  std::vector<bool> ran;     // per column: `data` is its receive op's output, not as sent
  uint32_t crc = 0;          // as received
  int64_t wire_bytes = 0;    // of the columns' data, as sent
};

// `message` split into a ReceivedBatch, its data moved, not copied.
ReceivedBatch Received(BatchMessage message);

// The batch `message` carries, checked against `schema` (per-sample specs
// as sent): DataLoss when the CRC or a size is wrong, naming the column.
// Uncompressed columns are the received buffers themselves (no copy). A
// column with one of `ops` comes out as its op's output: run as it was
// received, or here (after decompressing).
absl::StatusOr<Batch> DecodeBatch(ReceivedBatch message, const Schema& schema,
                                  std::shared_ptr<const std::vector<std::string>> files,
                                  BufferPool* pool = BufferPool::Default(), const ReceiveOps* ops = nullptr);

absl::StatusOr<Compression> ParseCompression(const std::string& name);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_BATCH_CODEC_H_
