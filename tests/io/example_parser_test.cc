#include "sluice/io/example_parser.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "example.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

class ExampleParserTest : public ::testing::Test {
 protected:
  ExampleParserTest()
      : parser_(
            {{"image", FeatureKind::kBytes, 4}, {"label", FeatureKind::kInt64, 1}, {"box", FeatureKind::kFloat, 2}}) {}

  Example Valid() {
    Example ex;
    auto& f = *ex.mutable_features()->mutable_feature();
    f["image"].mutable_bytes_list()->add_value("abcd");
    f["label"].mutable_int64_list()->add_value(-7);
    f["box"].mutable_float_list()->add_value(0.5f);
    f["box"].mutable_float_list()->add_value(-2.25f);
    f["unused"].mutable_int64_list()->add_value(1);
    return ex;
  }

  absl::Status Parse(const Example& ex) {
    uint8_t* out[] = {image_, reinterpret_cast<uint8_t*>(&label_), reinterpret_cast<uint8_t*>(box_)};
    return parser_.Parse(ex.SerializeAsString(), out);
  }

  ExampleParser parser_;
  uint8_t image_[4] = {};
  int64_t label_ = 0;
  float box_[2] = {};
};

TEST_F(ExampleParserTest, ExtractsDeclaredFeaturesAsProtobufWroteThem) {
  SLUICE_ASSERT_OK(Parse(Valid()));
  EXPECT_EQ(std::memcmp(image_, "abcd", 4), 0);
  EXPECT_EQ(label_, -7);
  EXPECT_EQ(box_[0], 0.5f);
  EXPECT_EQ(box_[1], -2.25f);
}

TEST_F(ExampleParserTest, MissingFeatureIsNotFound) {
  Example ex = Valid();
  ex.mutable_features()->mutable_feature()->erase("label");
  EXPECT_THAT(Parse(ex), StatusIs(absl::StatusCode::kNotFound, HasSubstr("feature 'label' missing")));
}

TEST_F(ExampleParserTest, WrongTypeIsInvalidArgument) {
  Example ex = Valid();
  (*ex.mutable_features()->mutable_feature())["label"].mutable_float_list()->add_value(1);
  EXPECT_THAT(Parse(ex),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("feature 'label': expected int64, got float32")));
}

TEST_F(ExampleParserTest, WrongLengthIsInvalidArgument) {
  Example ex = Valid();
  (*ex.mutable_features()->mutable_feature())["image"].mutable_bytes_list()->set_value(0, "abc");
  EXPECT_THAT(Parse(ex),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("feature 'image': expected 4 bytes, got 3")));
  ex = Valid();
  (*ex.mutable_features()->mutable_feature())["box"].mutable_float_list()->add_value(3);
  EXPECT_THAT(Parse(ex),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("feature 'box': expected 2 values, got 3")));
}

TEST_F(ExampleParserTest, GarbageIsDataLoss) {
  uint8_t* out[] = {image_, reinterpret_cast<uint8_t*>(&label_), reinterpret_cast<uint8_t*>(box_)};
  EXPECT_THAT(parser_.Parse("\x0a\xff\xff\xff", out),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("malformed tf.train.Example")));
}

TEST(ExampleParser, ReadsTwoThousandFeaturesByName) {
  // Examples of thousands of features (tabular data, recommendation
  // models): each declared one is found by its name, one missing is named.
  std::vector<FeatureSpec> specs;
  Example ex;
  auto& f = *ex.mutable_features()->mutable_feature();
  for (int i = 0; i < 2000; ++i) {
    specs.push_back({absl::StrCat("f.", i), FeatureKind::kInt64, 1});
    f[absl::StrCat("f.", i)].mutable_int64_list()->add_value(3 * i);
  }
  f["unused"].mutable_int64_list()->add_value(1);
  const ExampleParser parser(specs);
  std::vector<int64_t> values(2000, -1);
  std::vector<uint8_t*> out;
  for (int64_t& v : values) out.push_back(reinterpret_cast<uint8_t*>(&v));
  ASSERT_TRUE(parser.Parse(ex.SerializeAsString(), out.data()).ok());
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(values[i], 3 * i) << i;
  f.erase("f.1234");
  EXPECT_THAT(parser.Parse(ex.SerializeAsString(), out.data()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("feature 'f.1234' missing")));
}

TEST(ExampleParser, ReadsUnpackedRepeatedValues) {
  // Old writers emit int64 lists unpacked (one tag per value).
  std::string wire;
  for (int64_t v : {int64_t{3}, int64_t{300000000000}}) {
    wire.push_back(0x08);  // field 1, varint
    uint64_t x = static_cast<uint64_t>(v);
    while (x >= 0x80) {
      wire.push_back(static_cast<char>(x | 0x80));
      x >>= 7;
    }
    wire.push_back(static_cast<char>(x));
  }
  ExampleParser parser({{"ids", FeatureKind::kInt64, 2}});
  int64_t ids[2] = {};
  uint8_t* out[] = {reinterpret_cast<uint8_t*>(ids)};
  // Example{features{feature{key: ids, value{int64_list: <wire>}}}}, by hand.
  std::string feature_value = "\x1a" + std::string(1, static_cast<char>(wire.size())) + wire;
  std::string entry = "\x0a\x03ids\x12" + std::string(1, static_cast<char>(feature_value.size())) + feature_value;
  std::string features = "\x0a" + std::string(1, static_cast<char>(entry.size())) + entry;
  std::string example = "\x0a" + std::string(1, static_cast<char>(features.size())) + features;
  SLUICE_ASSERT_OK(parser.Parse(example, out));
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids[1], 300000000000);
}

}  // namespace
}  // namespace sluice::io
