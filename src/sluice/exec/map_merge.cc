#include "sluice/exec/map_merge.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sluice::exec {
namespace {

using graph::CompiledNode;
using graph::NodeKind;

bool PerSampleOnCpu(const CompiledNode& map) {
  return map.backend == ops::Backend::kCpu && std::all_of(map.ops.begin(), map.ops.end(), [](const graph::BoundOp& op) {
           return op.level == ops::OpLevel::kSample && !op.whole_ranges;
         });
}

bool HasDeviceMap(const std::vector<CompiledNode>& nodes) {
  return std::any_of(nodes.begin(), nodes.end(),
                     [](const CompiledNode& n) { return n.kind == NodeKind::kMap && n.backend != ops::Backend::kCpu; });
}

// Node i is a map that can run in map i - 2, before batch i - 1.
bool RunsBeforeBatch(const std::vector<CompiledNode>& nodes, size_t i) {
  if (i < 3 || nodes[i].kind != NodeKind::kMap || nodes[i - 1].kind != NodeKind::kBatch) return false;
  const CompiledNode& before = nodes[i - 2];
  return before.kind == NodeKind::kMap && before.parallelism == nodes[i].parallelism && PerSampleOnCpu(before) &&
         PerSampleOnCpu(nodes[i]);
}

}  // namespace

RunPlan PlanRun(const graph::CompiledPipeline& compiled) {
  RunPlan plan{compiled.nodes, std::vector<bool>(compiled.nodes.size(), false)};
  const bool mergeable =
      !compiled.nodes.empty() && !compiled.nodes.front().skip_corrupt && !HasDeviceMap(compiled.nodes);
  for (size_t i = 0; mergeable && i < plan.nodes.size(); ++i) {
    // A map already run before its batch runs no other map's ops.
    if (!RunsBeforeBatch(compiled.nodes, i) || plan.runs_before_batch[i - 2]) continue;
    const CompiledNode& after = compiled.nodes[i];
    CompiledNode& before = plan.nodes[i - 2];
    before.name = absl::StrCat(before.name, "+", after.name);  // errors name both
    before.ops.insert(before.ops.end(), after.ops.begin(), after.ops.end());
    before.output_schema = after.output_schema;
    plan.nodes[i - 1].input_schema = plan.nodes[i - 1].output_schema = after.output_schema;
    plan.runs_before_batch[i] = true;
  }
  return plan;
}

}  // namespace sluice::exec
