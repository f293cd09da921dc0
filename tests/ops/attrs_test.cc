#include "sluice/ops/attrs.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_test_util.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Attrs;

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
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({"sigma": 1, "sgima": 2})")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attr 'sgima' is unknown (attrs: k, sigma, mode, on)")));
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'sigma' is required")));
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({"sigma": 1, "k": 2.5})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'k' must be an integer, got 2.5")));
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({"sigma": "big"})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'sigma' must be a number")));
  EXPECT_THAT(Attrs::Bind(kSchema, Attrs(R"({"sigma": 1, "mode": 3})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'mode' must be a string")));
}

TEST(OpRegistry, UnknownOpListsTheKnownOnes) {
  EXPECT_THAT(OpRegistry::Builtin().Bind("gausian_blur", Attrs("{}"), Schema()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown op 'gausian_blur' (ops: cast, center_crop, crop_mirror_normalize, decode_image")));
}

TEST(OpRegistry, EveryOpHasDocsForEveryAttr) {
  for (const OpSchema* op : OpRegistry::Builtin().List()) {
    EXPECT_FALSE(op->doc.empty()) << op->name;
    for (const AttrSchema& a : op->attrs) EXPECT_FALSE(a.doc.empty()) << op->name << "." << a.name;
  }
}

}  // namespace
}  // namespace sluice::ops
