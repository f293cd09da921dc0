#include "sluice/exec/memory_minimum.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sluice/core/memory_default.h"
#include "sluice/exec/map_plan.h"

namespace sluice::exec {

namespace {

// The source's rows where every split says its count; -1 otherwise.
int64_t KnownRows(const graph::CompiledPipeline& c) {
  if (c.nodes.empty() || c.nodes.front().kind != graph::NodeKind::kSource) return -1;
  int64_t rows = 0;
  for (const io::Split& split : c.nodes.front().format->MakeSplits()) {
    if (split.records() < 0) return -1;
    rows += split.records();
  }
  return rows;
}

// What a source reading splits ahead (parallel_reads) holds of the pool
// at the least: the largest split, read whole while the consumer waits.
int64_t SplitReadWhole(const graph::CompiledNode& source) {
  if (source.parallel_reads <= 1) return 0;
  const std::vector<io::Split> splits = source.format->MakeSplits();
  if (splits.size() <= 1) return 0;  // read chunk by chunk
  int64_t most = 0;
  for (const io::Split& split : splits) most = std::max(most, source.format->SplitPoolBytes(split));
  return most;
}

}  // namespace

MemoryMinimum MeasureMemoryMinimum(const graph::CompiledPipeline& c, int64_t chunk_rows,
                                   const std::vector<BufferPool*>& output_pools) {
  MemoryMinimum m;
  m.chunk_rows = chunk_rows;
  int64_t epoch_rows = -2;  // the source's rows, once a shuffle asks (-1: unknown)
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const graph::CompiledNode& node = c.nodes[i];
    if (node.kind == graph::NodeKind::kSource) {
      const int64_t bytes = SplitReadWhole(node);
      if (bytes == 0) continue;
      m.bytes += bytes;
      m.parts.push_back(absl::StrFormat(
          "node '%s' %d (the largest split, read whole: parallel_reads %d; smaller splits take less, split_records)",
          node.name, bytes, node.parallel_reads));
      continue;
    }
    if (node.kind == graph::NodeKind::kShuffle) {
      // Its buffer's rows, at the least (ragged columns' bytes unknown
      // here), or the epoch's where it has fewer ("shuffle everything"),
      // and half as many again: at the budget, the chunks its rows came in
      // hold up to 3/2 of them before it compacts (shuffle_node.cc).
      const int64_t row = node.input_schema.RowBytes();
      if (epoch_rows == -2) epoch_rows = KnownRows(c);
      const int64_t rows = epoch_rows >= 0 ? std::min(node.count, epoch_rows) : node.count;
      if (row == 0) continue;
      const int64_t held = rows + rows / 2;
      const int64_t bytes =
          held > std::numeric_limits<int64_t>::max() / row ? std::numeric_limits<int64_t>::max() : held * row;
      m.bytes += bytes;
      m.parts.push_back(absl::StrFormat("node '%s' %d (a buffer of %d rows, in chunks of up to %d rows)", node.name,
                                        bytes, rows, held));
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
    std::vector<std::string> ops;
    for (const graph::BoundOp& op : node.ops) ops.push_back(op.name);
    m.parts.push_back(absl::StrFormat("node '%s' %d (ops %s)", node.name, bytes, absl::StrJoin(ops, ", ")));
  }
  return m;
}

absl::Status CheckMemoryBudget(const graph::CompiledPipeline& c, const MemoryMinimum& minimum) {
  if (c.memory_budget_bytes >= minimum.bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "memory_budget_bytes %d is less than the %d bytes this pipeline needs to make progress: one chunk of %d rows "
      "from each map node, every shuffle's buffer and the split a source reads whole (%s); raise it, or leave it unset "
      "for a default sized to the machine and the pipeline",
      c.memory_budget_bytes, minimum.bytes, minimum.chunk_rows, absl::StrJoin(minimum.parts, ", ")));
}

absl::Status FitDefaultMemoryBudget(const MemoryMinimum& minimum, graph::CompiledPipeline* c) {
  if (c->memory_budget_default.empty()) return absl::OkStatus();  // set by the options
  const int64_t needed = minimum.bytes + minimum.largest;
  if (c->memory_budget_bytes >= needed) return absl::OkStatus();
  constexpr int64_t kMiB = int64_t{1} << 20;
  const int64_t machine = DefaultMemoryBudgetOfMachine().machine_bytes;
  if (machine > 0 && needed > machine) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "this pipeline needs %d MiB to make a batch while the consumer holds one, more than the %d MiB of memory this "
        "process may use: one chunk of %d rows from each map node, every shuffle's buffer and the split a source "
        "reads whole (%s); make the batch, the shuffle buffer or the splits smaller",
        needed / kMiB, machine / kMiB, minimum.chunk_rows, absl::StrJoin(minimum.parts, ", ")));
  }
  const int64_t raised = (needed + kMiB - 1) / kMiB * kMiB;
  c->memory_budget_default =
      absl::StrFormat("%d MiB (room to make a batch while the consumer holds one; the machine's share, %s, is less)",
                      raised / kMiB, c->memory_budget_default);
  c->memory_budget_bytes = raised;
  return absl::OkStatus();
}

}  // namespace sluice::exec
