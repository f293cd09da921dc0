#include "absl/strings/str_cat.h"
#include "sluice/graph/fusion.h"
#include "sluice/ops/color_params.h"
#include "sluice/ops/geometry_params.h"

namespace sluice::graph {
namespace {

// The spec of `op` when it resamples (a fused warp, a rotation or a zoom:
// a flip alone copies pixels), for changing in place; null otherwise.
kernels::WarpSpec* ResamplingSpec(BoundOp* op, ops::FusedWarpParams* fused, ops::WarpParams* single) {
  if (op->op == ops::kFusedWarpOp && op->inferred.HoldsParams<ops::FusedWarpParams>()) {
    *fused = op->inferred.params<ops::FusedWarpParams>();
    return &fused->spec;
  }
  if (ops::IsResamplingWarpOp(op->op) && op->inferred.HoldsParams<ops::WarpParams>()) {
    *single = op->inferred.params<ops::WarpParams>();
    return &single->spec;
  }
  return nullptr;
}

}  // namespace

void FuseRescaleIntoWarp(const FusionOptions& options, std::vector<BoundOp>* ops) {
  if (options.backend != ops::Backend::kCpu) return;  // the cuda warp kernels read their output dtype
  std::vector<BoundOp> out;
  for (size_t i = 0; i < ops->size(); ++i) {
    BoundOp& op = (*ops)[i];
    if (op.op != "rescale" || i + 1 == ops->size() || !op.inferred.HoldsParams<ops::RescaleParams>()) {
      out.push_back(std::move(op));
      continue;
    }
    const ops::RescaleParams& rescale = op.inferred.params<ops::RescaleParams>();
    BoundOp& warp = (*ops)[i + 1];
    ops::FusedWarpParams fused;
    ops::WarpParams single;
    kernels::WarpSpec* spec = ResamplingSpec(&warp, &fused, &single);
    const bool same_column = warp.inferred.inputs == op.inferred.inputs && op.inferred.outputs.size() == 1 &&
                             warp.inferred.outputs.size() == 1 &&
                             op.inferred.outputs[0].name == warp.inferred.outputs[0].name;
    if (rescale.from != DType::kUInt8 || spec == nullptr || !same_column || spec->rescaled) {
      out.push_back(std::move(op));
      continue;
    }
    spec->dtype = DType::kUInt8;
    spec->rescaled = true;
    spec->scale = rescale.scale;
    spec->offset = rescale.offset;
    if (warp.op == ops::kFusedWarpOp) {
      warp.inferred.SetParams(std::move(fused));
    } else {
      warp.inferred.SetParams(std::move(single));
    }
    warp.name = absl::StrCat("rescale+", warp.name);
    // The rescale goes: the warp reads its uint8 input and writes the float.
  }
  *ops = std::move(out);
}

}  // namespace sluice::graph
