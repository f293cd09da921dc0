// Predicates for filter nodes: one keep (1) or drop (0) byte per sample.
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };

struct KeepIfParams {
  DType dtype;
  Cmp cmp;
  double value;
};

class KeepIfKernel : public Kernel {
 public:
  using Params = KeepIfParams;
  explicit KeepIfKernel(const Params& p) : dtype_(p.dtype), cmp_(p.cmp), value_(p.value) {}
  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      double x = 0;
      switch (dtype_) {
        case DType::kUInt8:
          x = *in[0].row<const uint8_t>(r);
          break;
        case DType::kInt32:
          x = static_cast<double>(*in[0].row<const int32_t>(r));
          break;
        case DType::kInt64:
          x = static_cast<double>(*in[0].row<const int64_t>(r));
          break;
        case DType::kFloat32:
          x = *in[0].row<const float>(r);
          break;
        case DType::kFloat16:  // not among the dtypes InferKeepIf accepts
          break;
      }
      bool keep = false;
      switch (cmp_) {
        case Cmp::kEq:
          keep = x == value_;
          break;
        case Cmp::kNe:
          keep = x != value_;
          break;
        case Cmp::kLt:
          keep = x < value_;
          break;
        case Cmp::kLe:
          keep = x <= value_;
          break;
        case Cmp::kGt:
          keep = x > value_;
          break;
        case Cmp::kGe:
          keep = x >= value_;
          break;
      }
      *out[0].row<uint8_t>(r) = keep ? 1 : 0;
    }
    return absl::OkStatus();
  }

 private:
  DType dtype_;
  Cmp cmp_;
  double value_;
};

absl::StatusOr<InferredOp> InferKeepIf(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f,
                          BindField(attrs, schema, {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32}));
  if (f.spec.shape.num_elements() != 1) {
    return AttrError("field", absl::StrCat("column '", f.spec.name, "' is ", f.spec.shape.ToString(),
                                           "; keep_if compares one value per sample"));
  }
  const std::string& op = attrs.GetString("cmp");  // one of the attr's choices
  const Cmp cmp = op == "=="   ? Cmp::kEq
                  : op == "!=" ? Cmp::kNe
                  : op == "<"  ? Cmp::kLt
                  : op == "<=" ? Cmp::kLe
                  : op == ">"  ? Cmp::kGt
                               : Cmp::kGe;
  InferredOp keep;
  keep.inputs = {f.column};
  keep.outputs = {ColumnSpec{"__keep", DType::kUInt8, Shape{}}};
  keep.SetParams(KeepIfParams{f.spec.dtype, cmp, attrs.GetFloat("value")});
  return keep;
}

}  // namespace

absl::Status RegisterPredicateOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("keep_if")
          .Doc("Filter predicate: keeps the samples whose scalar column compares true with a value, e.g. "
               "{\"field\": \"label\", \"cmp\": \"<\", \"value\": 5}.")
          .Attr({"field", AttrType::kString, "\"label\"", "a column with one value per sample"})
          .Attr(AttrSchema{"cmp", AttrType::kString, "", "the comparison"}.OneOf({"==", "!=", "<", "<=", ">", ">="}))
          .Attr({"value", AttrType::kFloat, "", "the value compared with"})
          .Input("field", "one uint8, int32, int64 or float32 value per sample")
          .Output("keep", "1 to keep the sample, 0 to drop it")
          .Predicate()
          .Infer(InferKeepIf)));
  return registry->AddKernel<KeepIfKernel>("keep_if", Backend::kCpu);
}

}  // namespace sluice::ops
