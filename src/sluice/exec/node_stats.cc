#include "sluice/exec/node_stats.h"

namespace sluice::exec {

PipelineStats::PipelineStats(const graph::CompiledPipeline& pipeline) : pipeline_(pipeline) {
  for (const graph::CompiledNode& node : pipeline.nodes) {
    nodes_.push_back(std::make_unique<NodeStats>(node.ops.size()));
  }
}

PipelineStatsSnapshot PipelineStats::Snapshot() const {
  PipelineStatsSnapshot out;
  out.at_ns = NowNs();
  out.consumer_calls = consumer_calls_.load(std::memory_order_relaxed);
  out.consumer_wait_ns = consumer_wait_ns_.load(std::memory_order_relaxed);
  constexpr auto kRelaxed = std::memory_order_relaxed;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const graph::CompiledNode& node = pipeline_.nodes[i];
    const NodeStats& s = *nodes_[i];
    NodeStatsSnapshot n;
    n.name = node.name;
    n.kind = node.kind;
    n.elements = s.elements.load(kRelaxed);
    n.rows = s.rows.load(kRelaxed);
    n.bytes = s.bytes.load(kRelaxed);
    n.get_next_ns = s.get_next_ns.load(kRelaxed);
    n.output_wait_ns = s.output_wait_ns.load(kRelaxed);
    n.buffered = s.buffered.load(kRelaxed);
    for (size_t op = 0; op < node.ops.size(); ++op) {
      n.op_names.push_back(node.ops[op].name);
      n.op_busy_ns.push_back(s.op_busy_ns[op].load(kRelaxed));
    }
    // Only this node calls its input's GetNext.
    n.input_wait_ns = i > 0 ? out.nodes[i - 1].get_next_ns : 0;
    switch (node.kind) {
      case graph::NodeKind::kMap:
        n.busy_ns = s.busy_ns.load(kRelaxed);
        break;
      case graph::NodeKind::kPrefetch:
        break;
      case graph::NodeKind::kRemote:  // waiting for the network, not computing
        n.input_wait_ns = n.get_next_ns;
        break;
      default:
        n.busy_ns = std::max<int64_t>(0, n.get_next_ns - n.input_wait_ns);
    }
    out.nodes.push_back(std::move(n));
  }
  return out;
}

}  // namespace sluice::exec
