// A plugin whose registration fails after it registered an op and its
// kernel: what it registered must be taken back.
#include "sluice/sluice.h"

namespace {

struct NoParams {};

class NothingKernel : public sluice::ops::Kernel {
 public:
  using Params = NoParams;
  explicit NothingKernel(const Params&) {}
  absl::Status Run(const sluice::ops::KernelContext&, absl::Span<const sluice::ops::ColumnRef>,
                   absl::Span<const sluice::ops::ColumnRef>) const override {
    return absl::OkStatus();
  }
};

absl::StatusOr<sluice::ops::InferredOp> InferNothing(const sluice::ops::Attrs&, const sluice::Schema&) {
  return absl::InvalidArgumentError("never inferred");
}

absl::Status Register(sluice::ops::PluginRegistrar& r) {
  SLUICE_RETURN_IF_ERROR(
      r.AddOp(sluice::ops::OpSchema("half_registered_op").Doc("registered before the failure").Infer(InferNothing)));
  SLUICE_RETURN_IF_ERROR(r.AddKernel<NothingKernel>("half_registered_op", sluice::ops::Backend::kCpu));
  return r.AddOp(sluice::ops::OpSchema("rescale").Doc("a name taken").Infer(InferNothing));
}

}  // namespace

SLUICE_PLUGIN(Register)
