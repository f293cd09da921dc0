// A plugin op that fails on a given label, naming the sample, crashes the
// process there, or hangs there: how a plugin kernel's error reaches the
// user, and how the service copes with a sample that kills its workers or
// never finishes.
#include <cstdlib>
#include <thread>

#include "sluice/sluice.h"

namespace {

struct FailParams {
  int64_t label;
  bool crash;
  bool hang;
};

class FailAtLabelKernel : public sluice::ops::Kernel {
 public:
  using Params = FailParams;
  explicit FailAtLabelKernel(const Params& p) : p_(p) {}
  absl::Status Run(const sluice::ops::KernelContext& ctx, absl::Span<const sluice::ops::ColumnRef> in,
                   absl::Span<const sluice::ops::ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const int64_t label = *in[0].row<const int64_t>(r);
      if (label == p_.label) {
        if (p_.crash) std::abort();
        while (p_.hang) std::this_thread::sleep_for(std::chrono::seconds(1));
        return absl::DataLossError("label " + std::to_string(label) + " is poison in " + ctx.Where(r));
      }
      *out[0].row<int64_t>(r) = label;
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

absl::StatusOr<sluice::ops::InferredOp> InferFail(const sluice::ops::Attrs& attrs, const sluice::Schema& input) {
  SLUICE_ASSIGN_OR_RETURN(sluice::ops::BoundField f, sluice::ops::BindField(attrs, input, {sluice::DType::kInt64}));
  return sluice::ops::UnaryOp(f.column, f.spec,
                              FailParams{attrs.GetInt("label"), attrs.GetBool("crash"), attrs.GetBool("hang")});
}

absl::Status Register(sluice::ops::PluginRegistrar& r) {
  SLUICE_RETURN_IF_ERROR(r.AddOp(sluice::ops::OpSchema("fail_at_label")
                                     .Doc("Fails on the sample whose label is `label` (a test plugin).")
                                     .Attr({"field", sluice::ops::AttrType::kString, "\"label\"", "an int64 column"})
                                     .Attr({"label", sluice::ops::AttrType::kInt, "", "the poison label"})
                                     .Attr({"crash", sluice::ops::AttrType::kBool, "false", "abort the process there"})
                                     .Attr({"hang", sluice::ops::AttrType::kBool, "false", "never return from there"})
                                     .Input("field", "int64")
                                     .Output("field", "the same values")
                                     .Infer(InferFail)));
  return r.AddKernel<FailAtLabelKernel>("fail_at_label", sluice::ops::Backend::kCpu);
}

}  // namespace

SLUICE_PLUGIN(Register)
