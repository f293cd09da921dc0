// A batch as the client receives it off the wire, of arbitrary bytes: the
// hand parser, then the decoder against a schema with a fixed-size, a
// scalar and a ragged column. The first byte chooses whether the CRC is
// made to match, so the size and offset checks behind it get fuzzed too.
#include <grpcpp/support/byte_buffer.h>

#include "fuzz_input.h"
#include "sluice/core/buffer_pool.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/wire_batch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using sluice::ColumnSpec;
  using sluice::DType;
  static const sluice::Schema schema({ColumnSpec{"image", DType::kUInt8, sluice::Shape({4, 4, 3}), false},
                                      ColumnSpec{"label", DType::kInt64, sluice::Shape(), false},
                                      ColumnSpec{"record", DType::kUInt8, sluice::Shape(), true}});
  const bool fix_crc = data[0] & 1;
  grpc::Slice slice(data + 1, size - 1);
  grpc::ByteBuffer bytes(&slice, 1);
  sluice::service::ReceivedBatch received;
  if (!sluice::service::ParseReceivedBatch(&bytes, sluice::BufferPool::Default(), &received).ok()) return 0;
  if (fix_crc) received.header.set_crc32c(received.crc);
  (void)sluice::service::DecodeBatch(std::move(received), schema, nullptr);
  return 0;
}
