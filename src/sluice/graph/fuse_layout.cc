#include "absl/strings/str_cat.h"
#include "sluice/graph/fusion.h"
#include "sluice/ops/geometry_params.h"

namespace sluice::graph {
namespace {

// Makes `op` write planes, if it is a warp whose kernel can: a fused warp,
// or a rotation or zoom alone (a flip alone copies pixels as they are).
template <typename Params>
bool SetPlanar(BoundOp* op) {
  if (!op->inferred.HoldsParams<Params>()) return false;
  Params params = op->inferred.params<Params>();
  params.spec.chw_out = true;
  op->inferred.SetParams(std::move(params));
  return true;
}

bool MakePlanar(BoundOp* op) {
  if (op->op == ops::kFusedWarpOp) return SetPlanar<ops::FusedWarpParams>(op);
  if (ops::IsResamplingWarpOp(op->op)) return SetPlanar<ops::WarpParams>(op);
  return false;
}

}  // namespace

void FuseLayout(const FusionOptions& options, std::vector<BoundOp>* ops) {
  if (options.backend != ops::Backend::kCpu) return;  // the cuda warp kernels write [H,W,C] only
  std::vector<BoundOp> out;
  for (BoundOp& op : *ops) {
    if (op.op == "hwc_to_chw" && !out.empty()) {
      BoundOp& warp = out.back();
      const bool same_column = warp.inferred.inputs == op.inferred.inputs && warp.inferred.outputs.size() == 1 &&
                               warp.inferred.outputs[0].name == op.inferred.outputs[0].name;
      if (same_column && MakePlanar(&warp)) {
        warp.inferred.outputs[0] = op.inferred.outputs[0];  // now [C,H,W]
        warp.name = absl::StrCat(warp.name, "+hwc_to_chw");
        continue;
      }
    }
    out.push_back(std::move(op));
  }
  *ops = std::move(out);
}

}  // namespace sluice::graph
