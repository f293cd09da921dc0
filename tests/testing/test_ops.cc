#include "test_ops.h"

#include <optional>

#include "sluice/core/status_macros.h"
#include "sluice/ops/field.h"

namespace sluice::testing {
namespace {

class BatchSumKernel : public ops::Kernel {
 public:
  struct Params {};
  explicit BatchSumKernel(const Params&) {}
  absl::Status Run(const ops::KernelContext& ctx, absl::Span<const ops::ColumnRef> in,
                   absl::Span<const ops::ColumnRef> out) const override {
    int64_t sum = 0;
    for (int64_t r = 0; r < ctx.rows; ++r) sum += *in[0].row<const int64_t>(r);
    for (int64_t r = 0; r < ctx.rows; ++r) *out[0].row<int64_t>(r) = sum;
    return absl::OkStatus();
  }
};

absl::StatusOr<ops::InferredOp> InferBatchSum(const ops::Attrs&, const Schema& input) {
  const std::optional<int> label = input.Find("label");
  if (!label || input.column(*label).dtype != DType::kInt64) {
    return absl::InvalidArgumentError("batch_sum needs an int64 column 'label'");
  }
  ops::InferredOp op;
  op.inputs = {*label};
  op.outputs = {ColumnSpec{"sum", DType::kInt64, Shape{}}};
  op.SetParams(BatchSumKernel::Params{});
  return op;
}

// Refuses (DataLoss) the rows whose int64 'label' is `label`, naming them;
// passes the others through.
class RefuseLabelKernel : public ops::Kernel {
 public:
  struct Params {
    int64_t label;
  };
  explicit RefuseLabelKernel(const Params& p) : p_(p) {}
  absl::Status Run(const ops::KernelContext& ctx, absl::Span<const ops::ColumnRef> in,
                   absl::Span<const ops::ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const int64_t label = *in[0].row<const int64_t>(r);
      if (label == p_.label)
        return absl::DataLossError("label " + std::to_string(label) + " refused in " + ctx.Where(r));
      *out[0].row<int64_t>(r) = label;
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

absl::StatusOr<ops::InferredOp> InferRefuseLabel(const ops::Attrs& attrs, const Schema& input) {
  SLUICE_ASSIGN_OR_RETURN(ops::BoundField f, ops::BindField(attrs, input, {DType::kInt64}));
  return ops::UnaryOp(f.column, f.spec, RefuseLabelKernel::Params{attrs.GetInt("label")});
}

}  // namespace

absl::Status RegisterTestOps(ops::OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(ops::OpSchema("refuse_label")
                                             .Doc("refuses the rows whose label is `label`")
                                             .Attr({"field", ops::AttrType::kString, "\"label\"", "an int64 column"})
                                             .Attr({"label", ops::AttrType::kInt, "", "the refused label"})
                                             .Input("field", "int64")
                                             .Output("field", "the same values")
                                             .Infer(InferRefuseLabel),
                                         "sluice's tests"));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<RefuseLabelKernel>("refuse_label", ops::Backend::kCpu, "sluice's tests"));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(ops::OpSchema("batch_sum")
                                             .Doc("every row: the batch's sum of 'label'")
                                             .Input("label", "int64")
                                             .Output("sum", "int64")
                                             .BatchLevel()
                                             .Infer(InferBatchSum),
                                         "sluice's tests"));
  return registry->AddKernel<BatchSumKernel>("batch_sum", ops::Backend::kCpu, "sluice's tests");
}

}  // namespace sluice::testing
