#include "sluice/service/batch_codec.h"

#include <grpcpp/support/byte_buffer.h>

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/batch_builder.h"
#include "sluice/service/wire_batch.h"
#include "status_matchers.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

const Schema kSchema({ColumnSpec{"image", DType::kUInt8, Shape{2, 3}},
                      ColumnSpec{"record", DType::kUInt8, Shape{}, /*ragged=*/true}});

// Rows 0..rows-1 of records 10.. of file 2, then one of file 0.
Batch MakeBatch(int rows) {
  BatchBuilder b(kSchema, rows);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < 6; ++i) b.dense(0)[r * 6 + i] = static_cast<uint8_t>(r * 6 + i);
    b.AppendBytes(1, std::string(r + 1, static_cast<char>('a' + r)));
  }
  b.provenance().AddRun(0, 2, 10);
  b.provenance().AddRun(rows - 1, 0, 5);
  b.AddRows(rows);
  return b.Finish();
}

// The wire bytes of `buffer` as one string, and back.
std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}
grpc::ByteBuffer Wire(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

TEST(BatchCodec, RoundTripsUnderEachCompression) {
  const Batch in = MakeBatch(5);
  for (Compression c : {COMPRESSION_NONE, COMPRESSION_ZSTD, COMPRESSION_LZ4}) {
    SCOPED_TRACE(Compression_Name(c));
    BatchMessage m;
    SLUICE_ASSERT_OK(EncodeBatch(in, c, &m));
    ASSERT_OK_AND_ASSIGN(Batch out, DecodeBatch(Received(m), kSchema, nullptr));
    ASSERT_EQ(out.rows, 5);
    EXPECT_EQ(std::memcmp(out.columns[0].values.raw_data(), in.columns[0].values.raw_data(), 30), 0);
    for (int r = 0; r < 5; ++r) EXPECT_EQ(out.columns[1].RaggedRow(r), in.columns[1].RaggedRow(r));
    EXPECT_EQ(out.provenance.SampleId(1), (int64_t{2} << 40) | 11);
    EXPECT_EQ(out.provenance.SampleId(4), 5);
  }
}

TEST(WireBatch, ParsesAsTheBatchMessageAndSendsTensorsWithoutCopies) {
  const Batch in = MakeBatch(5).Slice(1, 5);
  BatchMessage header;
  header.set_split(9);
  header.add_files("a.tfrecord");
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer wire, EncodeWireBatch(in, header, COMPRESSION_NONE));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(wire.Dump(&slices).ok());
  bool borrowed = false;
  for (const grpc::Slice& s : slices) borrowed |= s.begin() == in.columns[0].values.raw_data();
  EXPECT_TRUE(borrowed) << "the image column should travel as a slice of the tensor";
  const std::string bytes = Flatten(wire);
  auto parsed = std::make_shared<BatchMessage>();
  ASSERT_TRUE(parsed->ParseFromString(bytes));
  EXPECT_EQ(parsed->split(), 9);
  EXPECT_EQ(parsed->files(0), "a.tfrecord");
  ASSERT_OK_AND_ASSIGN(Batch out, DecodeBatch(Received(*parsed), kSchema, nullptr));
  ASSERT_EQ(out.rows, 4);
  EXPECT_EQ(std::memcmp(out.columns[0].values.raw_data(), in.columns[0].values.raw_data(), 24), 0);
  EXPECT_EQ(out.columns[1].RaggedRow(0), "bb");
  EXPECT_EQ(out.columns[1].RaggedRow(3), "eeeee");
  EXPECT_EQ(out.provenance.SampleId(0), (int64_t{2} << 40) | 11);
}

TEST(WireBatch, TheReceivingParserReadsWhatIsSentUnderEachCompression) {
  const Batch in = MakeBatch(5);
  BatchMessage header;
  header.set_split(3);
  header.add_files("a.tfrecord");
  for (Compression c : {COMPRESSION_NONE, COMPRESSION_ZSTD, COMPRESSION_LZ4}) {
    SCOPED_TRACE(Compression_Name(c));
    ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer wire, EncodeWireBatch(in, header, c));
    ReceivedBatch received;
    SLUICE_ASSERT_OK(ParseReceivedBatch(&wire, BufferPool::Default(), nullptr, nullptr, &received));
    EXPECT_EQ(received.header.split(), 3);
    EXPECT_EQ(received.header.files(0), "a.tfrecord");
    ASSERT_OK_AND_ASSIGN(Batch out, DecodeBatch(std::move(received), kSchema, nullptr));
    ASSERT_EQ(out.rows, 5);
    EXPECT_EQ(std::memcmp(out.columns[0].values.raw_data(), in.columns[0].values.raw_data(), 30), 0);
    for (int r = 0; r < 5; ++r) EXPECT_EQ(out.columns[1].RaggedRow(r), in.columns[1].RaggedRow(r));
    EXPECT_EQ(out.provenance.SampleId(4), 5);
  }
}

TEST(WireBatch, AFlippedOrMissingByteOnTheWireIsDataLoss) {
  BatchMessage header;
  header.set_split(4);
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer wire, EncodeWireBatch(MakeBatch(3), header, COMPRESSION_NONE));
  const std::string bytes = Flatten(wire);
  const size_t pixel = bytes.find(std::string("\x06\x07\x08", 3));  // row 1 of the image column
  ASSERT_NE(pixel, std::string::npos);
  std::string flipped = bytes;
  flipped[pixel] ^= 1;
  grpc::ByteBuffer flipped_wire = Wire(flipped);
  ReceivedBatch received;
  SLUICE_ASSERT_OK(ParseReceivedBatch(&flipped_wire, BufferPool::Default(), nullptr, nullptr, &received));
  EXPECT_THAT(DecodeBatch(std::move(received), kSchema, nullptr),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("batch of split 4: CRC32C mismatch")));
  grpc::ByteBuffer truncated = Wire(bytes.substr(0, bytes.size() - 3));
  EXPECT_THAT(ParseReceivedBatch(&truncated, BufferPool::Default(), nullptr, nullptr, &received),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("malformed batch message")));
}

TEST(BatchCodec, PlainColumnsAreTheReceivedBuffers) {
  BatchMessage m;
  SLUICE_ASSERT_OK(EncodeBatch(MakeBatch(4), COMPRESSION_NONE, &m));
  ReceivedBatch received = Received(m);
  const uint8_t* bytes = received.data[0].raw_data();
  ASSERT_OK_AND_ASSIGN(Batch out, DecodeBatch(std::move(received), kSchema, nullptr));
  EXPECT_EQ(out.columns[0].values.raw_data(), bytes);
  EXPECT_EQ(out.columns[0].values.raw_data()[7], 7);
}

TEST(BatchCodec, ARaggedSliceIsSentFromItsFirstByte) {
  const Batch in = MakeBatch(5).Slice(2, 4);
  BatchMessage m;
  SLUICE_ASSERT_OK(EncodeBatch(in, COMPRESSION_NONE, &m));
  ASSERT_OK_AND_ASSIGN(Batch out, DecodeBatch(Received(m), kSchema, nullptr));
  EXPECT_EQ(out.columns[1].RaggedRow(0), "ccc");
  EXPECT_EQ(out.columns[1].RaggedRow(1), "dddd");
}

TEST(BatchCodec, AFlippedByteOrAWrongShapeIsDataLoss) {
  BatchMessage m;
  SLUICE_ASSERT_OK(EncodeBatch(MakeBatch(3), COMPRESSION_LZ4, &m));
  m.set_split(7);
  BatchMessage flipped = m;
  (*flipped.mutable_columns(0)->mutable_data())[0] ^= 1;
  EXPECT_THAT(DecodeBatch(Received(flipped), kSchema, nullptr),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("batch of split 7: CRC32C mismatch")));
  const Schema wider(
      {ColumnSpec{"image", DType::kUInt8, Shape{2, 4}}, ColumnSpec{"record", DType::kUInt8, Shape{}, true}});
  EXPECT_THAT(DecodeBatch(Received(m), wider, nullptr),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("column 'image': 18 bytes for 3 rows")));
}

// Sizes and offsets that a damaged or forged message claims are checked
// before anything is allocated from them (a CRC does not cover them all,
// and anyone on the wire can recompute it).
TEST(BatchCodec, ForgedSizesAndOffsetsAreDataLossNotAnAllocation) {
  BatchMessage m;
  SLUICE_ASSERT_OK(EncodeBatch(MakeBatch(3), COMPRESSION_ZSTD, &m));
  m.set_split(7);
  BatchMessage huge = m;
  huge.mutable_columns(0)->set_uncompressed_size(int64_t{1} << 40);
  EXPECT_THAT(DecodeBatch(Received(huge), kSchema, nullptr),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("column 'image': claims 1099511627776 bytes; a batch carries 0 to 1073741824")));
  BatchMessage negative = m;
  negative.mutable_columns(1)->set_uncompressed_size(-6);
  EXPECT_THAT(DecodeBatch(Received(negative), kSchema, nullptr),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("column 'record': claims -6 bytes")));

  BatchMessage backwards = m;
  int64_t* offsets = reinterpret_cast<int64_t*>(backwards.mutable_columns(1)->mutable_offsets()->data());
  ASSERT_EQ(offsets[1], 1);
  offsets[1] = 5;  // rows 1.. 5 to 3: a negative length
  ReceivedBatch received = Received(backwards);
  received.header.set_crc32c(received.crc);
  EXPECT_THAT(DecodeBatch(std::move(received), kSchema, nullptr),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("column 'record': offsets go backwards at row 2")));
}

TEST(WireBatch, AColumnDataLengthBeyondItsColumnIsDataLoss) {
  // columns { data: <claims 2^31 bytes> "abc" }
  const auto tag = [](int field) { return std::string(1, static_cast<char>(field << 3 | 2)); };  // length-delimited
  const std::string column = tag(TensorData::kDataFieldNumber) + std::string("\x80\x80\x80\x80\x08", 5) + "abc";
  const std::string message =
      tag(BatchMessage::kColumnsFieldNumber) + std::string(1, static_cast<char>(column.size())) + column;
  grpc::ByteBuffer wire = Wire(message);
  ReceivedBatch received;
  EXPECT_THAT(
      ParseReceivedBatch(&wire, BufferPool::Default(), nullptr, nullptr, &received),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("column data claims 2147483648 bytes, the column holds 3")));
}

}  // namespace
}  // namespace sluice::service
