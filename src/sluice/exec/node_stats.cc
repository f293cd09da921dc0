#include "sluice/exec/node_stats.h"

#include <time.h>

namespace sluice::exec {

int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

PipelineStats::PipelineStats(const graph::CompiledPipeline& pipeline, std::vector<bool> runs_before_batch)
    : pipeline_(pipeline), runs_before_batch_(std::move(runs_before_batch)) {
  for (size_t i = 0; i < pipeline.nodes.size(); ++i) {
    size_t ops = pipeline.nodes[i].ops.size();
    if (i + 2 < runs_before_batch_.size() && runs_before_batch_[i + 2]) ops += pipeline.nodes[i + 2].ops.size();
    nodes_.push_back(std::make_unique<NodeStats>(ops));
  }
}

void PipelineStats::GiveBack(NodeStatsSnapshot* before, NodeStatsSnapshot* after, const NodeStats& counted) {
  int64_t own = 0, moved = 0;
  for (int64_t ns : before->op_busy_ns) own += ns;
  for (size_t op = 0; op < after->op_names.size(); ++op) {
    after->op_busy_ns[op] = counted.op_busy_ns[before->op_busy_ns.size() + op].load(std::memory_order_relaxed);
    moved += after->op_busy_ns[op];
  }
  // The runners' time outside the ops (claiming ranges, assembling
  // batches) is split as the ops' is.
  after->busy_ns =
      own + moved > 0 ? static_cast<int64_t>(static_cast<double>(before->busy_ns) * moved / (own + moved)) : 0;
  before->busy_ns -= after->busy_ns;
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
      case graph::NodeKind::kSource:  // reading's CPU, not its waits for storage
        n.busy_ns =
            std::max<int64_t>(0, n.get_next_ns - s.off_cpu_ns.load(kRelaxed)) + s.read_ahead_cpu_ns.load(kRelaxed);
        break;
      default:
        n.busy_ns = std::max<int64_t>(0, n.get_next_ns - n.input_wait_ns);
    }
    out.nodes.push_back(std::move(n));
    if (i < runs_before_batch_.size() && runs_before_batch_[i]) {
      GiveBack(&out.nodes[i - 2], &out.nodes[i], *nodes_[i - 2]);
    }
  }
  return out;
}

}  // namespace sluice::exec
