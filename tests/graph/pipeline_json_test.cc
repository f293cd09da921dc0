#include "sluice/graph/pipeline_json.h"

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace sluice::graph {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(PipelineJson, ErrorsNameTheFieldPath) {
  EXPECT_THAT(PipelineFromJson(R"({"nodes": [{"batch": {"size": "many"}}]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid pipeline JSON: (nodes[0].batch.size)")));
  EXPECT_THAT(PipelineFromJson(R"({"nodes": [{"batch": {"sise": 3}}]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(nodes[0].batch) sise")));
  EXPECT_THAT(PipelineFromJson(R"({"nodes": [)"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid pipeline JSON")));
}

TEST(PipelineJson, AnUnknownFieldIsAnsweredWithTheNearestNameAndThoseAllowed) {
  EXPECT_THAT(PipelineFromJson(R"({"nodes": [{"bach": {"size": 4}}]})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("(nodes[0]) bach: Cannot find field. Did you mean 'batch'?"),
                             HasSubstr("(nodes[0] takes name, source, map,"))));
  EXPECT_THAT(PipelineFromJson(R"({"nodse": []})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("Did you mean 'nodes'? (a pipeline takes name, nodes, seed, options)")));
  EXPECT_THAT(PipelineFromJson(R"({"nodes": [{"source": {"tfrecord": {"file": ["x"]}}}]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Did you mean 'files'?")));
  // Nothing near: only the names allowed.
  EXPECT_THAT(PipelineFromJson(R"({"nodes": [{"augment": {}}]})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("(nodes[0] takes name, source,"), Not(HasSubstr("Did you mean")))));
}

TEST(PipelineJson, JsonNestedDeeperThanAnyPipelineIsRefusedAtOnce) {
  // 30,000 levels of lists in an attr took protobuf 30 s to refuse.
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  const std::string json = R"({"nodes": [{"map": {"ops": [{"op": "x", "attrs": {"extra": )" + deep + "}}]}}]}";
  EXPECT_THAT(PipelineFromJson(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("invalid pipeline JSON: nested more than 64 levels deep")));
  // Brackets inside strings, escaped quotes among them, are no nesting.
  const std::string quoted = R"({"name": ")" + std::string(100, '[') + R"(\"[[", "nodes": []})";
  EXPECT_TRUE(PipelineFromJson(quoted).ok()) << PipelineFromJson(quoted).status();
}

TEST(PipelineJson, RoundTrips) {
  ASSERT_OK_AND_ASSIGN(PipelineDef def, PipelineFromJson(R"({
      "name": "t", "seed": 5,
      "nodes": [{"source": {"mnist": {"images": "i", "labels": "l"}}},
                {"map": {"ops": [{"op": "gaussian_blur", "attrs": {"ksize": 11, "sigma": [0.1, 2]}}]}},
                {"batch": {"size": 8, "drop_remainder": true}}]})"));
  EXPECT_EQ(def.nodes(1).map().ops(0).attrs().fields().at("ksize").number_value(), 11);
  ASSERT_OK_AND_ASSIGN(PipelineDef again, PipelineFromJson(PipelineToJson(def)));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(again, def));
}

TEST(PipelineJson, MissingFileIsNotFound) {
  EXPECT_THAT(PipelineFromJsonFile("/nonexistent/p.json"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/p.json")));
}

}  // namespace
}  // namespace sluice::graph
