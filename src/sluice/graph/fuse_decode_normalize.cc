#include "sluice/graph/fusion.h"

#include "absl/strings/str_cat.h"
#include "sluice/ops/decode_fusion.h"

namespace sluice::graph {

void FuseDecodeNormalize(std::vector<BoundOp>* ops) {
  std::vector<BoundOp> out;
  for (size_t i = 0; i < ops->size(); ++i) {
    BoundOp& op = (*ops)[i];
    if (i + 1 < ops->size()) {
      BoundOp& next = (*ops)[i + 1];
      std::shared_ptr<const ops::Kernel> fused;
      if (op.binding.kernel && next.binding.kernel && next.binding.inputs == op.binding.inputs) {
        fused = ops::FuseDecodeNormalize(*op.binding.kernel, *next.binding.kernel, next.op_key);
      }
      if (fused) {
        BoundOp both = std::move(op);  // runs under the decode's key, its windows' draws
        both.name = absl::StrCat("fused(", both.name, "+", next.name, ")");
        both.binding.kernel = std::move(fused);
        both.binding.outputs = next.binding.outputs;
        both.binding.random = both.binding.random || next.binding.random;
        out.push_back(std::move(both));
        ++i;
        continue;
      }
    }
    out.push_back(std::move(op));
  }
  *ops = std::move(out);
}

}  // namespace sluice::graph
