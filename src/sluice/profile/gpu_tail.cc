#include "sluice/profile/gpu_tail.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace sluice::profile {
namespace {

bool IsBarrier(const NodeDef& n) {
  return n.has_source() || n.has_filter() || n.has_shuffle() || n.has_repeat() || n.has_take() || n.has_distribute();
}

}  // namespace

absl::StatusOr<PipelineDef> TailOnGpu(const PipelineDef& def, const ops::OpRegistry& registry) {
  const int n = def.nodes_size();
  int start = 0, batch = -1;
  for (int i = 0; i < n; ++i) {
    const NodeDef& node = def.nodes(i);
    if (IsBarrier(node)) start = i + 1, batch = -1;
    if (node.has_batch()) batch = i;
    if (node.has_map() && !node.map().device().empty() && node.map().device() != "cpu") {
      return absl::NotFoundError("the pipeline has a device map already");
    }
  }
  // The ops after `start`, from the last, while they run on cuda.
  std::vector<std::pair<int, int>> tail;  // (node, op), last first
  bool compute = false;
  for (int i = n - 1; i >= start; --i) {
    const NodeDef& node = def.nodes(i);
    if (!node.has_map()) continue;
    int j = node.map().ops_size() - 1;
    for (; j >= 0; --j) {
      const std::string& op = node.map().ops(j).op();
      if (!registry.Runs(op, ops::Backend::kCuda)) break;
      const ops::OpSchema* schema = registry.Find(op);
      compute = compute || (schema != nullptr && !schema->view());
      tail.emplace_back(i, j);
    }
    if (j >= 0) break;
  }
  if (tail.empty() || !compute) return absl::NotFoundError("no ops at the end of the pipeline have cuda kernels");
  const int first_node = tail.back().first;
  if (batch < 0) return absl::NotFoundError("no batch node follows the ops with cuda kernels");
  MapDef gpu;
  gpu.set_device("cuda");
  gpu.set_parallelism(0);
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    *gpu.add_ops() = def.nodes(it->first).map().ops(it->second);
  }
  PipelineDef out = def;
  out.clear_nodes();
  for (int i = 0; i < n; ++i) {
    NodeDef node = def.nodes(i);
    if (node.has_map() && i >= first_node) {
      // The tail is a suffix: this node keeps the ops before its first.
      int keep = node.map().ops_size();
      for (const auto& [ni, oi] : tail) {
        if (ni == i) keep = std::min(keep, oi);
      }
      node.mutable_map()->mutable_ops()->DeleteSubrange(keep, node.map().ops_size() - keep);
      if (node.map().ops_size() == 0) continue;
    }
    *out.add_nodes() = node;
    if (i == batch) *out.add_nodes()->mutable_map() = gpu;
  }
  return out;
}

}  // namespace sluice::profile
