#include "sluice/service/receive_ops.h"

#include <grpcpp/support/byte_buffer.h>

#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/batch_builder.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/wire_batch.h"
#include "status_matchers.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int kRows = 7;
constexpr int kRowBytes = 4 * 4 * 3;
const double kMean[3] = {0.485, 0.456, 0.406};
const double kStd[3] = {0.229, 0.224, 0.225};

const Schema kWire({ColumnSpec{"image", DType::kUInt8, Shape{4, 4, 3}}, ColumnSpec{"label", DType::kInt64, Shape{}}});

// The consumer's part of a pipeline that normalizes the images it receives
// (per channel, as torchvision's ToTensor + Normalize) and casts the labels,
// compiled and set up as the service's client does: both ops on the
// kRemote node.
class ReceiveOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const PipelineDef def =
        PipelineBuilder::Arrays({MakeArrayColumn("image", {4, 4, 3}, std::vector<uint8_t>(kRowBytes)),
                                 MakeArrayColumn("label", {}, std::vector<int64_t>(1))})
            .Distribute()
            .Map({Op("normalize", {{"mean", {kMean[0], kMean[1], kMean[2]}},
                                   {"std", {kStd[0], kStd[1], kStd[2]}},
                                   {"scale", 1 / 255.0}}),
                  Op("cast", {{"field", "label"}, {"dtype", "float32"}})})
            .Build();
    graph::CompileRange range{1, -1, kWire, true};
    range.fold_into_remote = true;
    ASSERT_OK_AND_ASSIGN(compiled_, graph::Compile(def, ops::OpRegistry::Global(), range));
    SLUICE_ASSERT_OK(exec::PrepareKernels(&compiled_));
    ASSERT_EQ(compiled_.nodes[0].ops.size(), 2u);
    ops_ = ReceiveOps(compiled_.nodes[0], kWire);
  }

  // kRows rows of pixels p * 37 + r and labels 100 + r.
  static Batch Input() {
    BatchBuilder b(kWire, kRows);
    for (int r = 0; r < kRows; ++r) {
      for (int p = 0; p < kRowBytes; ++p) b.dense(0)[r * kRowBytes + p] = static_cast<uint8_t>(p * 37 + r);
      reinterpret_cast<int64_t*>(b.dense(1))[r] = 100 + r;
    }
    b.provenance().AddRun(0, 0, 0);
    b.AddRows(kRows);
    return b.Finish();
  }

  // The batch as gRPC might hand it over: in pieces of `piece` bytes.
  static grpc::ByteBuffer InPieces(const grpc::ByteBuffer& wire, size_t piece) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(wire.Dump(&slices).ok());
    std::string bytes;
    for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    std::vector<grpc::Slice> pieces;
    for (size_t at = 0; at < bytes.size(); at += piece) {
      pieces.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
    }
    return grpc::ByteBuffer(pieces.data(), pieces.size());
  }

  absl::StatusOr<Batch> Receive(grpc::ByteBuffer wire, bool run_on_receipt) {
    ReceivedBatch received;
    SLUICE_RETURN_IF_ERROR(
        ParseReceivedBatch(&wire, BufferPool::Default(), run_on_receipt ? &ops_ : nullptr, nullptr, &received));
    return DecodeBatch(std::move(received), kWire, nullptr, BufferPool::Default(), &ops_);
  }

  graph::CompiledPipeline compiled_;
  ReceiveOps ops_;
};

TEST_F(ReceiveOpsTest, ColumnsComeOutAsTheirOpsWriteThemWhateverPiecesTheyArriveIn) {
  const Batch in = Input();
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer wire, EncodeWireBatch(in, BatchMessage(), COMPRESSION_NONE));
  // Run after the whole column arrived (the path of compressed batches):
  // the reference for every piece size.
  ASSERT_OK_AND_ASSIGN(Batch whole, Receive(InPieces(wire, 1 << 20), /*run_on_receipt=*/false));
  ASSERT_EQ(whole.columns[0].values.dtype(), DType::kFloat32);
  const float* image = whole.columns[0].values.data<float>();
  for (int i = 0; i < kRows * kRowBytes; ++i) {
    const double expected = (in.columns[0].values.data<uint8_t>()[i] / 255.0 - kMean[i % 3]) / kStd[i % 3];
    ASSERT_NEAR(image[i], expected, 1e-5 * std::max(1.0, std::abs(expected))) << "element " << i;
  }
  for (int r = 0; r < kRows; ++r) EXPECT_EQ(whole.columns[1].values.data<float>()[r], 100.0f + r);

  // Pieces shorter than a row, splitting rows anywhere, and longer ones.
  for (size_t piece : {1, 5, 47, 48, 49, 100, 333, 1 << 20}) {
    SCOPED_TRACE(piece);
    ASSERT_OK_AND_ASSIGN(Batch got, Receive(InPieces(wire, piece), /*run_on_receipt=*/true));
    ASSERT_EQ(got.rows, kRows);
    ASSERT_EQ(got.columns[0].values.byte_size(), whole.columns[0].values.byte_size());
    EXPECT_EQ(std::memcmp(got.columns[0].values.raw_data(), whole.columns[0].values.raw_data(),
                          whole.columns[0].values.byte_size()),
              0);
    EXPECT_EQ(std::memcmp(got.columns[1].values.raw_data(), whole.columns[1].values.raw_data(), kRows * 4), 0);
    EXPECT_EQ(got.provenance.SampleId(3), 3);
  }
}

TEST_F(ReceiveOpsTest, CompressedBatchesRunTheOpsAfterDecompressing) {
  const Batch in = Input();
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer plain, EncodeWireBatch(in, BatchMessage(), COMPRESSION_NONE));
  ASSERT_OK_AND_ASSIGN(Batch expected, Receive(plain, true));
  for (Compression c : {COMPRESSION_ZSTD, COMPRESSION_LZ4}) {
    SCOPED_TRACE(Compression_Name(c));
    ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer wire, EncodeWireBatch(in, BatchMessage(), c));
    ASSERT_OK_AND_ASSIGN(Batch got, Receive(wire, /*run_on_receipt=*/false));
    EXPECT_EQ(std::memcmp(got.columns[0].values.raw_data(), expected.columns[0].values.raw_data(),
                          expected.columns[0].values.byte_size()),
              0);
    // Fed to the ops on receipt, compressed bytes would be garbage: refused,
    // as part rows or as converted but compressed.
    EXPECT_THAT(
        Receive(wire, /*run_on_receipt=*/true),
        StatusIs(absl::StatusCode::kDataLoss, ::testing::AnyOf(HasSubstr("converted on receipt, but compressed"),
                                                               HasSubstr("no whole number of 48-byte rows"))));
  }
  // A batch converted as it arrived that then claims to be compressed.
  ReceivedBatch received;
  SLUICE_ASSERT_OK(ParseReceivedBatch(&plain, BufferPool::Default(), &ops_, nullptr, &received));
  received.header.set_compression(COMPRESSION_LZ4);
  EXPECT_THAT(DecodeBatch(std::move(received), kWire, nullptr, BufferPool::Default(), &ops_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("column 'image': converted on receipt, but compressed")));
}

TEST_F(ReceiveOpsTest, AFlippedByteIsStillCaughtAndAColumnOfPartRowsIsRefused) {
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer wire, EncodeWireBatch(Input(), BatchMessage(), COMPRESSION_NONE));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(wire.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  const size_t pixel = bytes.find(std::string("\x00\x25\x4a\x6f", 4));  // row 0: 0, 37, 74, 111
  ASSERT_NE(pixel, std::string::npos);
  bytes[pixel + 2] ^= 4;
  grpc::Slice flipped(bytes.data(), bytes.size());
  EXPECT_THAT(Receive(grpc::ByteBuffer(&flipped, 1), true),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("CRC32C mismatch")));

  // Rows of 47 bytes where the op expects 48: no whole number of rows.
  const Schema short_rows({ColumnSpec{"image", DType::kUInt8, Shape{47}}, ColumnSpec{"label", DType::kInt64, Shape{}}});
  BatchBuilder b(short_rows, kRows);
  b.AddRows(kRows);
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer forged, EncodeWireBatch(b.Finish(), BatchMessage(), COMPRESSION_NONE));
  ReceivedBatch received;
  EXPECT_THAT(ParseReceivedBatch(&forged, BufferPool::Default(), &ops_, nullptr, &received),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("no whole number of 48-byte rows")));
}

}  // namespace
}  // namespace sluice::service
