// A plugin op whose kernel throws a C++ exception on a given label: the
// exception must reach the user as an error naming the op, not end the
// process from an engine thread.
#include <stdexcept>
#include <string>

#include "sluice/sluice.h"

namespace {

class ThrowAtLabelKernel : public sluice::ops::Kernel {
 public:
  using Params = int64_t;
  explicit ThrowAtLabelKernel(const Params& label) : label_(label) {}
  absl::Status Run(const sluice::ops::KernelContext& ctx, absl::Span<const sluice::ops::ColumnRef> in,
                   absl::Span<const sluice::ops::ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const int64_t label = *in[0].row<const int64_t>(r);
      if (label == label_) throw std::out_of_range("label " + std::to_string(label) + " has no class");
      *out[0].row<int64_t>(r) = label;
    }
    return absl::OkStatus();
  }

 private:
  const int64_t label_;
};

absl::StatusOr<sluice::ops::InferredOp> InferThrow(const sluice::ops::Attrs& attrs, const sluice::Schema& input) {
  SLUICE_ASSIGN_OR_RETURN(sluice::ops::BoundField f, sluice::ops::BindField(attrs, input, {sluice::DType::kInt64}));
  return sluice::ops::UnaryOp(f.column, f.spec, attrs.GetInt("label"));
}

absl::Status Register(sluice::ops::PluginRegistrar& r) {
  SLUICE_RETURN_IF_ERROR(r.AddOp(sluice::ops::OpSchema("throw_at_label")
                                     .Doc("Throws on the sample whose label is `label` (a test plugin).")
                                     .Attr({"field", sluice::ops::AttrType::kString, "\"label\"", "an int64 column"})
                                     .Attr({"label", sluice::ops::AttrType::kInt, "", "the label it throws on"})
                                     .Input("field", "int64")
                                     .Output("field", "the same values")
                                     .Infer(InferThrow)));
  return r.AddKernel<ThrowAtLabelKernel>("throw_at_label", sluice::ops::Backend::kCpu);
}

}  // namespace

SLUICE_PLUGIN(Register)
