#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "sluice/ops/parse_example.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

TEST(DecodeRaw, ReinterpretsBytesWithoutACopy) {
  ASSERT_OK_AND_ASSIGN(InferredOp b, testing::Infer("decode_raw", R"({"dtype": "float32"})",
                                                    ColumnSpec{"image", DType::kUInt8, Shape{16}}));
  EXPECT_TRUE(OpRegistry::Global().Find("decode_raw")->view());  // no kernel, no copy
  EXPECT_EQ(b.outputs[0].ToString(), "image: float32[4]");
  EXPECT_THAT(testing::Infer("decode_raw", R"({"dtype": "int64"})", ColumnSpec{"image", DType::kUInt8, Shape{12}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot decode 12 bytes")));
}

TEST(Reshape, InfersOneDimensionAndChecksTheCount) {
  ASSERT_OK_AND_ASSIGN(InferredOp b, testing::Infer("reshape", R"({"shape": [32, -1, 3]})",
                                                    ColumnSpec{"image", DType::kUInt8, Shape{3072}}));
  EXPECT_TRUE(OpRegistry::Global().Find("reshape")->view());
  EXPECT_EQ(b.outputs[0].shape, (Shape{32, 32, 3}));
  EXPECT_THAT(testing::Infer("reshape", R"({"shape": [32, 32]})", ColumnSpec{"image", DType::kUInt8, Shape{3072}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot reshape column 'image' [3072] (3072 values) to [32,32]")));
  // Dimensions whose product wraps around int64 (to 0 here) are refused,
  // not divided by (SIGFPE).
  EXPECT_THAT(testing::Infer("reshape", R"({"shape": [4294967296, 4294967296, -1]})",
                             ColumnSpec{"image", DType::kUInt8, Shape{3072}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot reshape column 'image' [3072] (3072 values) to [4294967296,4294967296,-1]")));
  EXPECT_THAT(testing::Infer("reshape", R"({"shape": [3, 4294967296, 4294967296]})",
                             ColumnSpec{"image", DType::kUInt8, Shape{3072}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot reshape column 'image'")));
}

TEST(Field, MissingColumnListsTheColumns) {
  EXPECT_THAT(OpRegistry::Global().Infer(
                  "reshape", testing::Attrs(R"({"field": "img", "shape": [4]})"),
                  Schema({ColumnSpec{"image", DType::kUInt8, Shape{4}}, ColumnSpec{"label", DType::kInt64, Shape{}}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attr 'field' names no column: 'img' (columns: image, label)")));
}

TEST(ParseExample, NeedsTheRecordColumn) {
  EXPECT_THAT(InferParseExample({{"label", io::FeatureKind::kInt64, 1}}, {Shape{}},
                                Schema({ColumnSpec{"image", DType::kUInt8, Shape{4}}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'record' column")));
}

}  // namespace
}  // namespace sluice::ops
