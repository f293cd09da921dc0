#include "sluice/profile/ablation.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice::profile {
namespace {

class StandInKernel : public ops::Kernel {
 public:
  absl::Status Run(const ops::KernelContext& ctx, absl::Span<const ops::ColumnRef> in,
                   absl::Span<const ops::ColumnRef> out) const override {
    for (const ops::ColumnRef& o : out) {
      const size_t bytes = static_cast<size_t>(ctx.rows * o.row_bytes);
      if (!in.empty() && in[0].ragged == nullptr && in[0].row_bytes == o.row_bytes) {
        if (o.data != in[0].data) std::memcpy(o.data, in[0].data, bytes);  // an in-place op's: already there
      } else {
        std::memset(o.data, 0, bytes);
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status AblateOp(graph::CompiledPipeline* pipeline, int node, int op) {
  if (node < 0 || node >= static_cast<int>(pipeline->nodes.size()) ||
      pipeline->nodes[node].kind != graph::NodeKind::kMap || op < 0 ||
      op >= static_cast<int>(pipeline->nodes[node].ops.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no op ", op, " in a map node ", node, " to ablate"));
  }
  if (pipeline->nodes[node].backend != ops::Backend::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", node, " runs on a device: ablation stands in on the cpu only"));
  }
  graph::BoundOp& bound = pipeline->nodes[node].ops[op];
  if (!bound.view) bound.kernel = std::make_shared<StandInKernel>();
  return absl::OkStatus();
}

}  // namespace sluice::profile
