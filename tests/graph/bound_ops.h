// A map's op chain bound as the compiler binds it (each op inferred against
// the schema the ops before it made), for the fusion passes' tests.
#ifndef SLUICE_TESTS_GRAPH_BOUND_OPS_H_
#define SLUICE_TESTS_GRAPH_BOUND_OPS_H_

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "op_harness.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/graph/fusion.h"

namespace sluice::graph::testing {

// (op, attrs as JSON).
using Chain = std::vector<std::pair<std::string, std::string>>;

inline std::vector<BoundOp> Bind(Schema schema, const Chain& chain) {
  std::vector<BoundOp> ops;
  for (const auto& [name, attrs] : chain) {
    absl::StatusOr<ops::InferredOp> inferred =
        ops::OpRegistry::Global().Infer(name, ops::testing::Attrs(attrs), schema);
    EXPECT_TRUE(inferred.ok()) << name << ": " << inferred.status();
    if (!inferred.ok()) return {};
    BoundOp op;
    op.op = op.name = name;
    op.op_key = ops.size() + 1;
    op.inferred = *std::move(inferred);
    for (const ColumnSpec& out : op.inferred.outputs) schema.Set(out);
    ops.push_back(std::move(op));
  }
  return ops;
}

inline std::vector<std::string> Names(const std::vector<BoundOp>& ops) {
  std::vector<std::string> names;
  for (const BoundOp& op : ops) names.push_back(op.op);
  return names;
}

inline FusionOptions OnCpu() { return {ops::OpRegistry::Global(), ops::Backend::kCpu}; }

// An image column [h, w, 3] of `dtype`.
inline Schema Image(DType dtype, int64_t h = 8, int64_t w = 8) {
  return Schema({ColumnSpec{"image", dtype, Shape{h, w, 3}}});
}

}  // namespace sluice::graph::testing

#endif  // SLUICE_TESTS_GRAPH_BOUND_OPS_H_
