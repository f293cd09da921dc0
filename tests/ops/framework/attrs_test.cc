#include "sluice/ops/attrs.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using testing::Attrs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<AttrSchema> kSchema = {
    {"k", AttrType::kInt, "3", ""},
    {"sigma", AttrType::kFloats, "", ""},
    {"mode", AttrType::kString, "\"reflect\"", ""},
    {"on", AttrType::kBool, "false", ""},
};

TEST(Attrs, ConvertsValuesAndFillsDefaults) {
  ASSERT_OK_AND_ASSIGN(auto a, Attrs::Bind(kSchema, Attrs(R"({"sigma": 0.8, "on": true})")));
  EXPECT_EQ(a.GetInt("k"), 3);
  EXPECT_THAT(a.GetFloats("sigma"), ElementsAre(0.8));  // a number is a list of one
  EXPECT_EQ(a.GetString("mode"), "reflect");
  EXPECT_TRUE(a.GetBool("on"));
}

TEST(Attrs, ErrorsNameTheAttr) {
  EXPECT_THAT(
      Attrs::Bind(kSchema, Attrs(R"({"sigma": 1, "sgima": 2})")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'sgima' is unknown (attrs: k, sigma, mode, on)")));
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'sigma' is required")));
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({"sigma": 1, "k": 2.5})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'k' must be an integer, got 2.5")));
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({"sigma": "big"})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'sigma' must be a number")));
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({"sigma": 1, "mode": 3})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'mode' must be a string")));
  // A C++ builder can set what JSON cannot write.
  for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    auto attrs = Attrs(R"({"sigma": [1, 2]})");
    (*attrs.mutable_fields())["sigma"].mutable_list_value()->mutable_values(1)->set_number_value(bad);
    EXPECT_THAT(Attrs::Bind(kSchema, attrs),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'sigma' must be a list of floats")));
    (*attrs.mutable_fields())["sigma"].set_number_value(bad);
    EXPECT_THAT(Attrs::Bind(kSchema, attrs),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'sigma' must be a finite number")));
  }
  // Finite, but an infinity as the 32-bit float the kernels compute in.
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({"sigma": 1e39})")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attr 'sigma' must be within +-3.4e38 (a 32-bit float), got 1e+39")));
  EXPECT_TRUE(Attrs::Bind(kSchema, Attrs(R"({"sigma": 3e38})")).ok());
}

// One attr of each type, each with the constraints its type takes.
const std::vector<AttrSchema> kConstrained = {
    AttrSchema{"count", AttrType::kInt, "1", ""}.Range(1, 10),
    AttrSchema{"p", AttrType::kFloat, "0.5", ""}.Range(0, 1),
    AttrSchema{"rate", AttrType::kFloat, "1", ""}.Above(0),
    AttrSchema{"on", AttrType::kBool, "false", ""},
    AttrSchema{"layout", AttrType::kString, "\"CHW\"", ""}.OneOf({"CHW", "HWC"}),
    AttrSchema{"size", AttrType::kInts, "[8]", ""}.Count(1, 2).Range(1, 65535),
    AttrSchema{"sigma", AttrType::kFloats, "[1]", ""}.Count(1, 2).Above(0),
};

TEST(Attrs, ConstraintsOfEveryTypeNameTheAttrAndWhatItAllows) {
  SLUICE_ASSERT_OK(Attrs::Bind(kConstrained, Attrs(R"({"count": 10, "p": 0, "size": [4, 6], "sigma": 0.5})")).status());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"count": 0})", "attr 'count' must be in [1, 10], got 0"},
      {R"({"count": 1.5})", "attr 'count' must be an integer, got 1.5"},
      {R"({"p": 1.5})", "attr 'p' must be in [0, 1], got 1.5"},
      {R"({"rate": 0})", "attr 'rate' must be > 0, got 0"},
      {R"({"on": 1})", "attr 'on' must be true or false, got 1"},
      {R"({"layout": "NCHW"})", "attr 'layout' must be one of \"CHW\", \"HWC\", got \"NCHW\""},
      {R"({"layout": 3})", "attr 'layout' must be a string, got 3"},
      {R"({"size": [1, 2, 3]})", "attr 'size' must be 1 or 2 values, each in [1, 65535], got [1, 2, 3]"},
      {R"({"size": [0]})", "attr 'size' must be 1 or 2 values, each in [1, 65535], got [0]"},
      {R"({"size": ["a"]})", "attr 'size' must be a list of ints"},
      {R"({"sigma": [1, -2]})", "attr 'sigma' must be 1 or 2 values, each > 0, got [1, -2]"},
  };
  for (const auto& [json, message] : cases) {
    EXPECT_THAT(Attrs::Bind(kConstrained, Attrs(json)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)))
        << json;
  }
}

TEST(AttrSchema, ConstraintSaysWhatIsAllowed) {
  EXPECT_EQ(kConstrained[0].Constraint(), "in [1, 10]");
  EXPECT_EQ(kConstrained[2].Constraint(), "> 0");
  EXPECT_EQ(kConstrained[3].Constraint(), "");
  EXPECT_EQ(kConstrained[4].Constraint(), "one of \"CHW\", \"HWC\"");
  EXPECT_EQ(kConstrained[5].Constraint(), "1 or 2 values, each in [1, 65535]");
}

TEST(OpRegistry, UnknownOpListsTheKnownOnes) {
  EXPECT_THAT(OpRegistry::Global().Infer("gausian_blur", Attrs("{}"), Schema()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unknown op 'gausian_blur'; did you mean 'gaussian_blur'? (ops: "),
                             HasSubstr("center_crop, "), HasSubstr("random_flip, "))));
  // No suggestion for a name near none.
  EXPECT_THAT(OpRegistry::Global().Infer("sharpen_everything", Attrs("{}"), Schema()),
              StatusIs(absl::StatusCode::kInvalidArgument, Not(HasSubstr("did you mean"))));
}

TEST(OpRegistry, EveryOpHasDocsForEveryAttr) {
  for (const OpSchema* op : OpRegistry::Global().List()) {
    EXPECT_FALSE(op->doc().empty()) << op->name();
    for (const AttrSchema& a : op->attrs()) EXPECT_FALSE(a.doc.empty()) << op->name() << "." << a.name;
  }
}

}  // namespace
}  // namespace sluice::ops
