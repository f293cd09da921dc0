#include "sluice/placement/variant.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/graph/fingerprint.h"
#include "sluice/graph/pipeline_json.h"

namespace sluice::placement {
namespace {

using ::testing::HasSubstr;

PipelineDef Def(const std::string& nodes, const std::string& options = "{\"placement\": \"auto\"}") {
  absl::StatusOr<PipelineDef> def =
      graph::PipelineFromJson("{\"nodes\": [" + nodes + "], \"options\": " + options + "}");
  EXPECT_TRUE(def.ok()) << def.status();
  return *def;
}

const char kSource[] = R"({"source": {"cifar10": {"files": ["x.bin"]}}})";
const char kMap[] = R"({"map": {"ops": [{"op": "random_flip"}]}})";
const char kBatch[] = R"({"batch": {"size": 4}})";

TEST(Variant, PutsTheWorkersBeforeTheBatchAndKeepsTheFingerprint) {
  const PipelineDef def = Def(std::string(kSource) + "," + kMap + "," + kBatch + "," + kMap);
  Placement p;
  p.threads = 3;
  p.local_workers = 1;
  const PipelineDef v = Variant(def, p);
  ASSERT_EQ(v.nodes_size(), 5);
  EXPECT_TRUE(v.nodes(2).has_distribute());
  EXPECT_EQ(v.nodes(2).distribute().local_workers(), 1);
  EXPECT_TRUE(v.nodes(3).has_batch());
  EXPECT_EQ(v.options().threads(), 3);
  EXPECT_EQ(v.options().placement(), "");
  EXPECT_EQ(graph::OutputFingerprint(v), graph::OutputFingerprint(def));
  p.local_workers = 0;
  EXPECT_EQ(Variant(def, p).nodes_size(), 4);
}

TEST(Variant, AnUnbatchedPipelineRunsWhollyOnItsWorkers) {
  Placement p;
  p.local_workers = 2;
  const PipelineDef v = Variant(Def(std::string(kSource) + "," + kMap), p);
  ASSERT_EQ(v.nodes_size(), 3);
  EXPECT_TRUE(v.nodes(2).has_distribute());
}

TEST(Variant, TheDispatchersWorkersRunTheFrontThroughTheOptionsService) {
  const PipelineDef def = Def(std::string(kSource) + "," + kMap + "," + kBatch,
                              R"({"placement": "auto", "placement_service": {"dispatcher": "10.0.0.5:7000",
                                  "job_name": "train", "token_file": "/run/token"}})");
  EXPECT_TRUE(FreeLevers(def).service_workers);
  Placement p;
  p.threads = 2;
  p.service_workers = true;
  const PipelineDef v = Variant(def, p);
  ASSERT_EQ(v.nodes_size(), 4);
  ASSERT_TRUE(v.nodes(2).has_distribute());
  EXPECT_EQ(v.nodes(2).distribute().dispatcher(), "10.0.0.5:7000");
  EXPECT_EQ(v.nodes(2).distribute().job_name(), "train");
  EXPECT_EQ(v.nodes(2).distribute().token_file(), "/run/token");
  EXPECT_EQ(v.nodes(2).distribute().connect_timeout_s(), 3);  // a move refused soon, not after 30 s
  EXPECT_FALSE(v.options().has_placement_service());
  EXPECT_EQ(graph::OutputFingerprint(v), graph::OutputFingerprint(def));
  EXPECT_EQ(graph::OutputFingerprint(def),
            graph::OutputFingerprint(Def(std::string(kSource) + "," + kMap + "," + kBatch)));
  // No dispatcher named, or a front a worker cannot run: the lever is off.
  EXPECT_FALSE(FreeLevers(Def(std::string(kSource) + "," + kMap + "," + kBatch)).service_workers);
  EXPECT_FALSE(FreeLevers(Def(R"({"source": {"python_dataset": {}}}, )" + std::string(kBatch),
                              R"({"placement": "auto", "placement_service": {"dispatcher": "h:1"}})"))
                   .service_workers);
}

TEST(Variant, LeversAUserFixedStayFixed) {
  const std::string nodes = std::string(kSource) + "," + kMap + "," + kBatch;
  Levers free = FreeLevers(Def(nodes));
  EXPECT_TRUE(free.threads);
  EXPECT_TRUE(free.local_workers);
  EXPECT_FALSE(free.gpu_tail);
  EXPECT_FALSE(FreeLevers(Def(nodes, R"({"placement": "auto", "threads": 2})")).threads);
  EXPECT_FALSE(
      FreeLevers(Def(std::string(kSource) + R"(, {"distribute": {"local_workers": 1}}, )" + kBatch)).local_workers);
  EXPECT_FALSE(FreeLevers(Def(std::string(kSource) + R"(, {"shard": {"num_shards": 2}}, )" + kBatch)).local_workers);
  // A take before the batch: a worker's part cannot end there.
  EXPECT_FALSE(FreeLevers(Def(std::string(kSource) + R"(, {"take": {"count": 5}}, )" + kBatch)).local_workers);
  EXPECT_FALSE(FreeLevers(Def(R"({"source": {"python_dataset": {}}}, )" + std::string(kBatch))).local_workers);
}

TEST(Variant, StartsOnTheUsersThreadsOrEveryCore) {
  EXPECT_EQ(StartingPlacement(Def(kSource), 6).threads, 6);
  EXPECT_EQ(StartingPlacement(Def(kSource, R"({"threads": 2})"), 6).threads, 2);
  EXPECT_EQ(StartingPlacement(Def(kSource), 6).local_workers, 0);
}

TEST(Variant, ABadPlacementIsNamed) {
  EXPECT_TRUE(CheckPlacementOption(Def(kSource, R"({"placement": "manual"})")).ok());
  EXPECT_TRUE(CheckPlacementOption(Def(kSource, "{}")).ok());
  const absl::Status s = CheckPlacementOption(Def(kSource, R"({"placement": "fast"})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("options.placement: \"fast\" is not a placement"));
  const absl::Status manual = CheckPlacementOption(Def(kSource, R"({"placement_service": {"dispatcher": "h:1"}})"));
  EXPECT_EQ(manual.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(manual.message(), HasSubstr("options.placement_service names a dispatcher for placement \"auto\""));
  const absl::Status empty =
      CheckPlacementOption(Def(kSource, R"({"placement": "auto", "placement_service": {"job_name": "x"}})"));
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.message(), HasSubstr("options.placement_service.dispatcher is empty"));
}

}  // namespace
}  // namespace sluice::placement
