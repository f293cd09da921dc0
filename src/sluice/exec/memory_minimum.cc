#include "sluice/exec/memory_minimum.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sluice/exec/map_plan.h"

namespace sluice::exec {

MemoryMinimum MeasureMemoryMinimum(const graph::CompiledPipeline& c, int64_t chunk_rows,
                                   const std::vector<BufferPool*>& output_pools) {
  MemoryMinimum m;
  m.chunk_rows = chunk_rows;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const graph::CompiledNode& node = c.nodes[i];
    if (node.kind == graph::NodeKind::kShuffle) {
      // Its buffer's rows, at the least (ragged columns' bytes unknown here).
      int64_t row = 0;
      for (const ColumnSpec& column : node.input_schema.columns()) row += column.row_bytes();
      const int64_t bytes = node.count * row;
      if (bytes == 0) continue;
      m.bytes += bytes;
      m.parts.push_back(absl::StrFormat("node '%s' %d (a buffer of %d rows)", node.name, bytes, node.count));
      continue;
    }
    // A service client's remote node runs the maps folded into it (its ops)
    // on each batch as it arrives, as a map node would.
    const bool maps =
        node.kind == graph::NodeKind::kMap || (node.kind == graph::NodeKind::kRemote && !node.ops.empty());
    if (!maps || output_pools[i] != nullptr) continue;
    const int64_t bytes = MapPlan::Make(node)->ChunkBlockBytes(chunk_rows);
    m.bytes += bytes;
    m.largest = std::max(m.largest, bytes);
    m.parts.push_back(absl::StrFormat("node '%s' %d", node.name, bytes));
  }
  return m;
}

absl::Status CheckMemoryBudget(const graph::CompiledPipeline& c, const MemoryMinimum& minimum) {
  if (c.memory_budget_bytes >= minimum.bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "memory_budget_bytes %d is less than the %d bytes this pipeline needs to make progress: one chunk of %d rows "
      "from each map node and every shuffle's buffer (%s); raise it, or leave it unset for a default sized to the "
      "machine and the pipeline",
      c.memory_budget_bytes, minimum.bytes, minimum.chunk_rows, absl::StrJoin(minimum.parts, ", ")));
}

void FitDefaultMemoryBudget(const MemoryMinimum& minimum, graph::CompiledPipeline* c) {
  if (c->memory_budget_default.empty()) return;  // set by the options
  const int64_t needed = minimum.bytes + minimum.largest;
  if (c->memory_budget_bytes >= needed) return;
  constexpr int64_t kMiB = int64_t{1} << 20;
  const int64_t raised = (needed + kMiB - 1) / kMiB * kMiB;
  c->memory_budget_default =
      absl::StrFormat("%d MiB (room to make a batch while the consumer holds one; the machine's share, %s, is less)",
                      raised / kMiB, c->memory_budget_default);
  c->memory_budget_bytes = raised;
}

}  // namespace sluice::exec
