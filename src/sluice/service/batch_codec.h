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

namespace sluice::service {

// Fills `out`'s rows, columns, sample ids, compression and CRC (the other
// fields are the caller's).
absl::Status EncodeBatch(const Batch& batch, Compression compression, BatchMessage* out);

// The batch `message` carries, checked against `schema` (per-sample specs):
// DataLoss when the CRC or a size is wrong, naming the column. Uncompressed
// dense columns view the message's own bytes (no copy); the batch keeps the
// message alive.
absl::StatusOr<Batch> DecodeBatch(std::shared_ptr<BatchMessage> message, const Schema& schema,
                                  std::shared_ptr<const std::vector<std::string>> files,
                                  BufferPool* pool = BufferPool::Default());

absl::StatusOr<Compression> ParseCompression(const std::string& name);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_BATCH_CODEC_H_
