// Parsing and reinterpreting ops: parse_example, decode_raw, reshape.
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/tfrecord_source.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/parse_example.h"

namespace sluice::ops {
namespace {

struct ParseExampleParams {
  std::vector<io::FeatureSpec> features;
};

class ParseExampleKernel : public Kernel {
 public:
  using Params = ParseExampleParams;
  explicit ParseExampleKernel(const Params& p) : parser_(p.features) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const size_t n = out.size();
    absl::InlinedVector<uint8_t*, 16> dst(n);
    for (int64_t r = 0; r < ctx.rows; ++r) {
      for (size_t i = 0; i < n; ++i) {
        dst[i] =
            out[i].views != nullptr ? reinterpret_cast<uint8_t*>(&out[i].views[r]) : out[i].data + r * out[i].row_bytes;
      }
      absl::Status s = parser_.Parse(in[0].bytes(r), dst.data());
      if (!s.ok()) return WithContext(s, ctx.Where(r));
    }
    return absl::OkStatus();
  }

 private:
  io::ExampleParser parser_;
};

// A view of `f` as `out`: no kernel, no params.
InferredOp ViewOp(const BoundField& f, ColumnSpec out) {
  InferredOp op;
  op.inputs = {f.column};
  op.outputs = {std::move(out)};
  return op;
}

absl::StatusOr<InferredOp> InferDecodeRaw(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8}));
  const absl::StatusOr<DType> to = ParseDType(attrs.GetString("dtype"));  // the attr's choices are dtypes
  const int64_t bytes = f.spec.shape.num_elements();
  const int64_t size = static_cast<int64_t>(DTypeSize(*to));
  if (bytes % size != 0) {
    return AttrError("dtype", absl::StrCat("cannot decode ", bytes, " bytes of column '", f.spec.name, "' as ",
                                           DTypeName(*to), " (", size, " bytes each)"));
  }
  ColumnSpec out = f.spec;
  out.dtype = *to;
  out.shape = Shape{bytes / size};
  return ViewOp(f, out);  // little-endian host: the bytes are already the values
}

absl::StatusOr<InferredOp> InferReshape(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f,
                          BindField(attrs, schema, {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32}));
  std::vector<int64_t> dims = attrs.GetInts("shape");
  const int64_t total = f.spec.shape.num_elements();
  auto mismatch = [&] {
    return AttrError("shape",
                     absl::StrCat("cannot reshape column '", f.spec.name, "' ", f.spec.shape.ToString(), " (", total,
                                  " values) to ", Shape{absl::MakeConstSpan(attrs.GetInts("shape"))}.ToString()));
  };
  int64_t known = 1;  // at most total: a product past it (or past int64) is refused before it is formed
  int infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (dims[i] <= 0) {
      return AttrError("shape", absl::StrCat("dimensions must be positive (one may be -1), got ", dims[i]));
    } else if (dims[i] > total / known) {
      return mismatch();
    } else {
      known *= dims[i];
    }
  }
  if (infer >= 0) {
    if (total % known != 0) return mismatch();
    dims[infer] = total / known;
  }
  if (infer < 0 && known != total) return mismatch();
  ColumnSpec out = f.spec;
  out.shape = Shape{absl::MakeConstSpan(dims)};
  return ViewOp(f, out);
}

}  // namespace

absl::StatusOr<InferredOp> InferParseExample(const std::vector<io::FeatureSpec>& features,
                                             const std::vector<Shape>& shapes, const Schema& input) {
  std::optional<int> record = input.Find(io::kRecordColumn);
  if (!record || !input.column(*record).ragged) {
    return absl::InvalidArgumentError("parse_example needs the raw 'record' column of a tfrecord source");
  }
  InferredOp b;
  b.inputs = {*record};
  for (size_t i = 0; i < features.size(); ++i) {
    const io::FeatureSpec& f = features[i];
    ColumnSpec spec{f.name, DType::kUInt8, shapes[i]};
    spec.ragged = f.kind == io::FeatureKind::kBytes && f.count == io::kAnyLength;
    if (f.kind == io::FeatureKind::kInt64) spec.dtype = DType::kInt64;
    if (f.kind == io::FeatureKind::kFloat) spec.dtype = DType::kFloat32;
    b.outputs.push_back(spec);
  }
  b.drops = {io::kRecordColumn};
  b.SetParams(ParseExampleParams{features});
  return b;
}

absl::Status RegisterParseOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("decode_raw")
          .Doc("Reinterprets a uint8 column's bytes as little-endian values of another dtype (tf.io.decode_raw); "
               "[n] bytes become [n / size] values. No copy is made.")
          .Attr(FieldAttr())
          .Attr(AttrSchema{"dtype", AttrType::kString, "\"uint8\"", "the values' dtype"}.OneOf(
              {"uint8", "int32", "int64", "float32"}))
          .Input("field", "uint8 [n]")
          .Output("field", "dtype [n / size]")
          .View()
          .Infer(InferDecodeRaw)));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("reshape")
          .Doc("Gives each sample of a column a new shape with the same number of values; one dimension may be -1 "
               "to be inferred. No copy is made.")
          .Attr(FieldAttr())
          .Attr(AttrSchema{"shape", AttrType::kInts, "", "the new per-sample shape, e.g. [32, 32, 3]"}.Count(1, 0))
          .Input("field", "any dense column")
          .Output("field", "the same values in the new shape")
          .View()
          .Infer(InferReshape)));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema(kParseExampleOp)
          .Doc("Parses tf.train.Example records into the features a tfrecord source declares (made by the graph "
               "from the source's features).")
          .Input("record", "the raw records")
          .Output("<feature>", "one column per declared feature")
          .Internal()));
  return registry->AddKernel<ParseExampleKernel>(kParseExampleOp, Backend::kCpu);
}

}  // namespace sluice::ops
