#include "sluice/graph/fold_receive.h"

#include <algorithm>

namespace sluice::graph {
namespace {

// Whether `op`, the next op of a map reading `schema`, can run on its
// column as the column arrives.
bool Foldable(const ops::OpRegistry& registry, const BoundOp& op, const Schema& schema) {
  const ops::OpSchema* declared = registry.Find(op.op);
  if (declared == nullptr || !declared->elementwise() || op.inferred.random) return false;
  const ops::InferredOp& in = op.inferred;
  if (in.inputs.size() != 1 || in.outputs.size() != 1 || !in.drops.empty()) return false;
  const ColumnSpec& column = schema.column(in.inputs[0]);
  return !column.ragged && column.shape.num_elements() > 0 && in.outputs[0].name == column.name;
}

}  // namespace

void FoldIntoReceive(const ops::OpRegistry& registry, CompiledPipeline* compiled) {
  std::vector<CompiledNode>& nodes = compiled->nodes;
  if (nodes.empty() || nodes.front().kind != NodeKind::kRemote) return;
  size_t map = 1;
  while (map < nodes.size() && (nodes[map].kind == NodeKind::kBatch || nodes[map].kind == NodeKind::kPrefetch)) {
    ++map;
  }
  if (map == nodes.size() || nodes[map].kind != NodeKind::kMap || nodes[map].backend != ops::Backend::kCpu) return;

  CompiledNode& remote = nodes.front();
  std::vector<BoundOp>& chain = nodes[map].ops;
  Schema schema = remote.output_schema;
  size_t folded = 0;
  for (; folded < chain.size() && Foldable(registry, chain[folded], schema); ++folded) {
    const int column = chain[folded].inferred.inputs[0];
    const bool column_taken = std::any_of(remote.ops.begin(), remote.ops.end(),
                                          [&](const BoundOp& op) { return op.inferred.inputs[0] == column; });
    if (column_taken) break;                        // one op per column: the receiver applies one
    schema.Set(chain[folded].inferred.outputs[0]);  // in place: same index
    remote.ops.push_back(std::move(chain[folded]));
  }
  if (folded == 0) return;
  chain.erase(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(folded));
  remote.output_schema = schema;
  for (size_t i = 1; i < map; ++i) nodes[i].input_schema = nodes[i].output_schema = schema;
  nodes[map].input_schema = schema;
  if (chain.empty()) nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(map));
}

}  // namespace sluice::graph
