// A batch as the client receives it off the wire, of arbitrary bytes: the
// hand parser, then the decoder against a schema with a fixed-size, a
// scalar and a ragged column. The first byte chooses whether the CRC is
// made to match, so the size and offset checks behind it get fuzzed too,
// and whether the image column is normalized as it arrives (an op folded
// into the distribute node, fed the column in gRPC's pieces).
#include <grpcpp/support/byte_buffer.h>

#include <cstdlib>

#include "fuzz_input.h"
#include "sluice/core/buffer_pool.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/receive_ops.h"
#include "sluice/service/wire_batch.h"

namespace {

using sluice::ColumnSpec;
using sluice::DType;

const sluice::Schema& WireSchema() {
  static const sluice::Schema schema({ColumnSpec{"image", DType::kUInt8, sluice::Shape({4, 4, 3}), false},
                                      ColumnSpec{"label", DType::kInt64, sluice::Shape(), false},
                                      ColumnSpec{"record", DType::kUInt8, sluice::Shape(), true}});
  return schema;
}

// The client's side of a pipeline normalizing the images after its
// distribute node, compiled and set up once.
const sluice::service::ReceiveOps& Normalize() {
  static const sluice::graph::CompiledPipeline* compiled = [] {
    const sluice::PipelineDef def =
        sluice::PipelineBuilder::Arrays({sluice::MakeArrayColumn("image", {4, 4, 3}, std::vector<uint8_t>(48))})
            .Distribute()
            .Map({sluice::Op("normalize", {{"mean", {0.5, 0.4, 0.3}}, {"std", {0.2, 0.2, 0.2}}})})
            .Build();
    sluice::graph::CompileRange range{1, -1, WireSchema(), true};
    range.fold_into_remote = true;
    auto c = sluice::graph::Compile(def, sluice::ops::OpRegistry::Global(), range);
    if (!c.ok() || !sluice::exec::PrepareKernels(&*c).ok()) std::abort();
    return new sluice::graph::CompiledPipeline(*std::move(c));
  }();
  static const sluice::service::ReceiveOps ops(compiled->nodes[0], WireSchema());
  return ops;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool fix_crc = data[0] & 1;
  const sluice::service::ReceiveOps* ops = (data[0] & 2) ? &Normalize() : nullptr;
  // Pieces of 1 to 64 bytes, as gRPC's slices split a message anywhere.
  const size_t piece = (data[0] >> 2) + 1;
  std::vector<grpc::Slice> pieces;
  for (size_t at = 1; at < size; at += piece) pieces.emplace_back(data + at, std::min(piece, size - at));
  grpc::ByteBuffer bytes(pieces.data(), pieces.size());
  sluice::service::ReceivedBatch received;
  const absl::Status parsed =
      sluice::service::ParseReceivedBatch(&bytes, sluice::BufferPool::Default(), ops, nullptr, &received);
  if (!parsed.ok()) return 0;
  if (fix_crc) received.header.set_crc32c(received.crc);
  (void)sluice::service::DecodeBatch(std::move(received), WireSchema(), nullptr, sluice::BufferPool::Default(), ops);
  return 0;
}
