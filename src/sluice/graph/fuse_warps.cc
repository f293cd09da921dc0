#include "sluice/graph/fusion.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sluice/ops/warp.h"

namespace sluice::graph {
namespace {

const ops::WarpKernel* AsWarp(const BoundOp& op) {
  return dynamic_cast<const ops::WarpKernel*>(op.binding.kernel.get());
}

}  // namespace

void FuseWarps(std::vector<BoundOp>* ops) {
  std::vector<BoundOp> out;
  for (size_t i = 0; i < ops->size();) {
    const ops::WarpKernel* first = AsWarp((*ops)[i]);
    size_t j = i + 1;
    while (first != nullptr && j < ops->size()) {
      const ops::WarpKernel* next = AsWarp((*ops)[j]);
      if (next == nullptr || (*ops)[j].binding.inputs != (*ops)[i].binding.inputs ||
          !ops::CanFuse(first->spec(), next->spec())) {
        break;
      }
      ++j;
    }
    if (j - i < 2) {
      out.push_back(std::move((*ops)[i]));
      ++i;
      continue;
    }
    std::vector<std::pair<std::shared_ptr<const ops::WarpKernel>, uint64_t>> parts;
    std::vector<std::string> names;
    for (size_t k = i; k < j; ++k) {
      parts.emplace_back(std::static_pointer_cast<const ops::WarpKernel>((*ops)[k].binding.kernel),
                         (*ops)[k].op_key);
      names.push_back((*ops)[k].name);
    }
    BoundOp fused = std::move((*ops)[i]);
    fused.name = absl::StrCat("fused(", absl::StrJoin(names, "+"), ")");
    fused.binding.kernel = ops::FuseWarps(std::move(parts));
    fused.binding.random = true;
    out.push_back(std::move(fused));
    i = j;
  }
  *ops = std::move(out);
}

}  // namespace sluice::graph
