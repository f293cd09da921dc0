#include "absl/strings/str_cat.h"
#include "sluice/graph/fusion.h"
#include "sluice/ops/decode_params.h"

namespace sluice::graph {
namespace {

// Whether `decode` then `normalize` can run as one op.
bool Fusable(const BoundOp& decode, const BoundOp& normalize) {
  return ops::IsDecodeOp(decode.op) && decode.inferred.HoldsParams<ops::DecodeParams>() &&
         normalize.op == "crop_mirror_normalize" && normalize.inferred.HoldsParams<ops::CropMirrorNormalizeParams>() &&
         !normalize.inferred.params<ops::CropMirrorNormalizeParams>().crops() &&
         normalize.inferred.inputs == decode.inferred.inputs;
}

}  // namespace

void FuseDecodeNormalize(const FusionOptions& options, std::vector<BoundOp>* ops) {
  if (!options.registry.Runs(ops::kFusedDecodeNormalizeOp, options.backend)) return;
  std::vector<BoundOp> out;
  for (size_t i = 0; i < ops->size(); ++i) {
    BoundOp& op = (*ops)[i];
    if (i + 1 < ops->size() && Fusable(op, (*ops)[i + 1])) {
      const BoundOp& next = (*ops)[i + 1];
      BoundOp both = std::move(op);  // runs under the decode's key, its windows' draws
      both.op = ops::kFusedDecodeNormalizeOp;
      both.name = absl::StrCat("fused(", both.name, "+", next.name, ")");
      both.inferred.SetParams(ops::FusedDecodeNormalizeParams{
          both.inferred.params<ops::DecodeParams>(), next.inferred.params<ops::CropMirrorNormalizeParams>().normalizer,
          next.op_key});
      both.inferred.outputs = next.inferred.outputs;
      both.inferred.random = both.inferred.random || next.inferred.random;
      out.push_back(std::move(both));
      ++i;
      continue;
    }
    out.push_back(std::move(op));
  }
  *ops = std::move(out);
}

}  // namespace sluice::graph
