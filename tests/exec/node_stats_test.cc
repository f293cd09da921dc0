// A snapshot reads every node's counters and derives the busy time of nodes
// that compute on their caller's thread from their GetNext time less their
// input's.
#include "sluice/exec/node_stats.h"

#include "gtest/gtest.h"

namespace sluice::exec {
namespace {

graph::CompiledPipeline Plan() {
  graph::CompiledPipeline plan;
  for (graph::NodeKind kind : {graph::NodeKind::kSource, graph::NodeKind::kMap, graph::NodeKind::kBatch}) {
    graph::CompiledNode node;
    node.kind = kind;
    node.name = kind == graph::NodeKind::kMap ? "augment" : "n";
    if (kind == graph::NodeKind::kMap) node.ops.resize(2), node.ops[0].name = "blur", node.ops[1].name = "flip";
    plan.nodes.push_back(std::move(node));
  }
  return plan;
}

TEST(PipelineStats, SnapshotsDeriveTheBusyTimeOfCallerThreadNodes) {
  const graph::CompiledPipeline plan = Plan();
  PipelineStats stats(plan);
  stats.node(0)->get_next_ns = 300;  // the source computes on its caller's thread
  stats.node(1)->get_next_ns = 1000;
  stats.node(1)->busy_ns = 5000;  // a map's own threads
  stats.node(1)->op_busy_ns[0] = 4000;
  stats.node(1)->op_busy_ns[1] = 1000;
  stats.node(2)->get_next_ns = 1600;
  stats.node(2)->elements = 4;
  stats.CountConsumerWait(70);
  stats.CountConsumerWait(30);
  const PipelineStatsSnapshot s = stats.Snapshot();
  ASSERT_EQ(s.nodes.size(), 3u);
  EXPECT_EQ(s.nodes[0].busy_ns, 300);
  EXPECT_EQ(s.nodes[0].input_wait_ns, 0);
  EXPECT_EQ(s.nodes[1].busy_ns, 5000);
  EXPECT_EQ(s.nodes[1].input_wait_ns, 300);
  EXPECT_EQ(s.nodes[1].op_names, (std::vector<std::string>{"blur", "flip"}));
  EXPECT_EQ(s.nodes[1].op_busy_ns, (std::vector<int64_t>{4000, 1000}));
  EXPECT_EQ(s.nodes[2].busy_ns, 600);  // its GetNext less its input's
  EXPECT_EQ(s.nodes[2].elements, 4);
  EXPECT_EQ(s.consumer_calls, 2);
  EXPECT_EQ(s.consumer_wait_ns, 100);
}

TEST(PipelineStats, AMapRunBeforeItsBatchGetsItsOpsTimeBack) {
  // source -> map "augment" (blur, flip) -> batch -> map "tail" (rotate),
  // whose op runs in augment's threads and is counted there after its own.
  graph::CompiledPipeline plan = Plan();
  graph::CompiledNode tail;
  tail.kind = graph::NodeKind::kMap;
  tail.name = "tail";
  tail.ops.resize(1);
  tail.ops[0].name = "rotate";
  plan.nodes.push_back(std::move(tail));
  PipelineStats stats(plan, {false, false, false, true});
  ASSERT_EQ(stats.node(1)->op_busy_ns.size(), 3u);
  stats.node(1)->busy_ns = 10000;  // 8000 in ops, a fifth of it in the tail's
  stats.node(1)->op_busy_ns[0] = 4000;
  stats.node(1)->op_busy_ns[1] = 2400;
  stats.node(1)->op_busy_ns[2] = 1600;
  const PipelineStatsSnapshot s = stats.Snapshot();
  EXPECT_EQ(s.nodes[1].op_busy_ns, (std::vector<int64_t>{4000, 2400}));
  EXPECT_EQ(s.nodes[3].op_names, (std::vector<std::string>{"rotate"}));
  EXPECT_EQ(s.nodes[3].op_busy_ns, (std::vector<int64_t>{1600}));
  EXPECT_EQ(s.nodes[3].busy_ns, 2000);
  EXPECT_EQ(s.nodes[1].busy_ns, 8000);
}

}  // namespace
}  // namespace sluice::exec
