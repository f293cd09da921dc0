#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sluice/graph/fusion.h"
#include "sluice/ops/geometry_params.h"

namespace sluice::graph {
namespace {

// The warp params of `op`, or null when it is not one of the warp ops or
// has no kernel on the backend (the fused kernel would run it there
// anyway: random_perspective has no cuda kernel).
const ops::WarpParams* AsWarp(const FusionOptions& options, const BoundOp& op) {
  const bool warp = ops::IsWarpOp(op.op) && options.registry.Runs(op.op, options.backend);
  return warp && op.inferred.HoldsParams<ops::WarpParams>() ? &op.inferred.params<ops::WarpParams>() : nullptr;
}

}  // namespace

void FuseWarps(const FusionOptions& options, std::vector<BoundOp>* ops) {
  if (!options.registry.Runs(ops::kFusedWarpOp, options.backend)) return;
  std::vector<BoundOp> out;
  for (size_t i = 0; i < ops->size();) {
    const ops::WarpParams* first = AsWarp(options, (*ops)[i]);
    size_t j = i + 1;
    while (first != nullptr && j < ops->size()) {
      const ops::WarpParams* next = AsWarp(options, (*ops)[j]);
      if (next == nullptr || (*ops)[j].inferred.inputs != (*ops)[i].inferred.inputs ||
          !ops::CanFuse(first->spec, next->spec)) {
        break;
      }
      ++j;
    }
    if (j - i < 2) {
      out.push_back(std::move((*ops)[i]));
      ++i;
      continue;
    }
    ops::FusedWarpParams fused_params{first->spec, {}};
    std::vector<std::string> names;
    for (size_t k = i; k < j; ++k) {
      fused_params.parts.emplace_back(AsWarp(options, (*ops)[k])->part, (*ops)[k].op_key);
      names.push_back((*ops)[k].name);
    }
    BoundOp fused = std::move((*ops)[i]);  // reads and writes what the first did
    fused.op = ops::kFusedWarpOp;
    fused.name = absl::StrCat("fused(", absl::StrJoin(names, "+"), ")");
    fused.inferred.SetParams(std::move(fused_params));
    fused.inferred.random = true;
    out.push_back(std::move(fused));
    i = j;
  }
  *ops = std::move(out);
}

}  // namespace sluice::graph
