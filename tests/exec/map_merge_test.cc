// Which maps after a batch run in the map before it, and what the executor
// then runs: the first map with both chains of ops, the batch batching its
// output.
#include "sluice/exec/map_merge.h"

#include "gtest/gtest.h"

namespace sluice::exec {
namespace {

using graph::CompiledNode;
using graph::NodeKind;

graph::BoundOp Op(const std::string& name, ops::OpLevel level = ops::OpLevel::kSample) {
  graph::BoundOp op;
  op.op = op.name = name;
  op.level = level;
  return op;
}

CompiledNode Node(NodeKind kind, const std::string& name, std::vector<graph::BoundOp> ops = {}) {
  CompiledNode node;
  node.kind = kind;
  node.name = name;
  node.ops = std::move(ops);
  node.output_schema = Schema({ColumnSpec{name, DType::kUInt8, Shape({1})}});
  return node;
}

// source -> map(blur) -> batch -> map(flip, rotate) -> prefetch
graph::CompiledPipeline W2Like() {
  graph::CompiledPipeline plan;
  plan.nodes = {Node(NodeKind::kSource, "source_0"), Node(NodeKind::kMap, "map_1", {Op("blur")}),
                Node(NodeKind::kBatch, "batch_2"), Node(NodeKind::kMap, "map_3", {Op("flip"), Op("rotate")}),
                Node(NodeKind::kPrefetch, "prefetch_4")};
  return plan;
}

std::vector<std::string> OpNames(const CompiledNode& node) {
  std::vector<std::string> names;
  for (const graph::BoundOp& op : node.ops) names.push_back(op.name);
  return names;
}

TEST(MapMerge, AMapOfPerSampleOpsAfterABatchRunsInTheMapBeforeIt) {
  const graph::CompiledPipeline plan = W2Like();
  const RunPlan run = PlanRun(plan);
  EXPECT_EQ(run.runs_before_batch, (std::vector<bool>{false, false, false, true, false}));
  EXPECT_EQ(OpNames(run.nodes[1]), (std::vector<std::string>{"blur", "flip", "rotate"}));
  EXPECT_EQ(run.nodes[1].name, "map_1+map_3");
  EXPECT_EQ(run.nodes[1].output_schema.column(0).name, "map_3");
  EXPECT_EQ(run.nodes[2].output_schema.column(0).name, "map_3");          // the batch batches the merged output
  EXPECT_EQ(OpNames(plan.nodes[1]), (std::vector<std::string>{"blur"}));  // the plan stays as written
}

TEST(MapMerge, MapsThatCannotRunBeforeTheirBatchStayWhereTheyAre) {
  auto unmerged = [](graph::CompiledPipeline plan) {
    const RunPlan run = PlanRun(plan);
    return run.runs_before_batch == std::vector<bool>(plan.nodes.size(), false) &&
           OpNames(run.nodes[1]) == std::vector<std::string>{"blur"};
  };
  graph::CompiledPipeline batch_level = W2Like();  // MixUp mixes the batch it is given
  batch_level.nodes[3].ops.push_back(Op("mixup", ops::OpLevel::kBatch));
  EXPECT_TRUE(unmerged(batch_level));
  graph::CompiledPipeline python = W2Like();  // a Python op's ranges go whole to its processes
  python.nodes[3].ops[0].whole_ranges = true;
  EXPECT_TRUE(unmerged(python));
  graph::CompiledPipeline skipping = W2Like();
  skipping.nodes[0].skip_corrupt = true;
  EXPECT_TRUE(unmerged(skipping));
  graph::CompiledPipeline threads = W2Like();
  threads.nodes[3].parallelism = 1;
  EXPECT_TRUE(unmerged(threads));
  graph::CompiledPipeline device = W2Like();
  device.nodes.push_back(Node(NodeKind::kMap, "map_5", {Op("normalize")}));
  device.nodes.back().backend = ops::Backend::kCuda;
  EXPECT_TRUE(unmerged(device));
  graph::CompiledPipeline prefetched = W2Like();  // something between the batch and the map
  std::swap(prefetched.nodes[3], prefetched.nodes[4]);
  EXPECT_TRUE(unmerged(prefetched));
}

TEST(MapMerge, AMapRunBeforeItsBatchTakesNoOtherMapsOps) {
  // map_1 -> batch -> map_3 -> batch -> map_5: map_3 runs in map_1, so
  // map_5 stays (merging it into map_3 would lose its ops).
  graph::CompiledPipeline plan = W2Like();
  plan.nodes[4] = Node(NodeKind::kBatch, "batch_4");
  plan.nodes.push_back(Node(NodeKind::kMap, "map_5", {Op("normalize")}));
  const RunPlan run = PlanRun(plan);
  EXPECT_EQ(run.runs_before_batch, (std::vector<bool>{false, false, false, true, false, false}));
  EXPECT_EQ(OpNames(run.nodes[5]), (std::vector<std::string>{"normalize"}));
}

}  // namespace
}  // namespace sluice::exec
