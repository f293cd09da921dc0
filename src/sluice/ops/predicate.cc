// Predicates for filter nodes: one keep (1) or drop (0) byte per sample.
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };

class KeepIfKernel : public Kernel {
 public:
  KeepIfKernel(DType dtype, Cmp cmp, double value) : dtype_(dtype), cmp_(cmp), value_(value) {}
  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
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
        case DType::kFloat16:  // not among the dtypes BindKeepIf accepts
          break;
      }
      bool keep = false;
      switch (cmp_) {
        case Cmp::kEq: keep = x == value_; break;
        case Cmp::kNe: keep = x != value_; break;
        case Cmp::kLt: keep = x < value_; break;
        case Cmp::kLe: keep = x <= value_; break;
        case Cmp::kGt: keep = x > value_; break;
        case Cmp::kGe: keep = x >= value_; break;
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

absl::StatusOr<OpBinding> BindKeepIf(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(
      BoundField f,
      BindField(attrs, schema, {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32}));
  if (f.spec.shape.num_elements() != 1) {
    return AttrError("field", absl::StrCat("column '", f.spec.name, "' is ", f.spec.shape.ToString(),
                                           "; keep_if compares one value per sample"));
  }
  const std::string& op = attrs.GetString("cmp");
  Cmp cmp;
  if (op == "==") cmp = Cmp::kEq;
  else if (op == "!=") cmp = Cmp::kNe;
  else if (op == "<") cmp = Cmp::kLt;
  else if (op == "<=") cmp = Cmp::kLe;
  else if (op == ">") cmp = Cmp::kGt;
  else if (op == ">=") cmp = Cmp::kGe;
  else return AttrError("cmp", absl::StrCat("must be one of == != < <= > >=, got \"", op, "\""));
  OpBinding b;
  b.inputs = {f.column};
  b.outputs = {ColumnSpec{"__keep", DType::kUInt8, Shape{}}};
  b.kernel = std::make_shared<KeepIfKernel>(f.spec.dtype, cmp, attrs.GetFloat("value"));
  return b;
}

}  // namespace

void RegisterPredicateOps(OpRegistry* registry) {
  registry->Register(OpSchema{
      "keep_if",
      "Filter predicate: keeps the samples whose scalar column compares true with a value, "
      "e.g. {\"field\": \"label\", \"cmp\": \"<\", \"value\": 5}.",
      {{"field", AttrType::kString, "\"label\"", "a column with one value per sample"},
       {"cmp", AttrType::kString, "", "==, !=, <, <=, > or >="},
       {"value", AttrType::kFloat, "", "the value compared with"}},
      false,
      true,
      BindKeepIf});
}

}  // namespace sluice::ops
