// Helpers shared by ops that transform one column (attr "field") in place.
#ifndef SLUICE_OPS_FIELD_H_
#define SLUICE_OPS_FIELD_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/core/schema.h"
#include "sluice/ops/attrs.h"
#include "sluice/ops/op_schema.h"

namespace sluice::ops {

// The "field" attr every single-column op declares.
AttrSchema FieldAttr();

struct BoundField {
  int column;
  ColumnSpec spec;
};

// The dense column named by attr "field", with one of `dtypes`.
// InvalidArgument naming the column and listing the alternatives otherwise.
absl::StatusOr<BoundField> BindField(const Attrs& attrs, const Schema& schema, std::initializer_list<DType> dtypes);

// ImageDims lives in core, below the kernels that take it; ops and plugins
// name it here too.
using ::sluice::ImageDims;

// InvalidArgument unless `spec` is [H,W] or [H,W,C].
absl::StatusOr<ImageDims> ImageDimsOf(const ColumnSpec& spec);

// The "layout" attr of ops on CHW (after crop_mirror_normalize) or HWC images.
AttrSchema LayoutAttr();

// An image [C,H,W] or [H,W,C] as attr "layout" says, or [H,W]: its dims,
// and whether the channels come first. InvalidArgument naming `op` otherwise.
struct LaidOutImage {
  ImageDims dims;
  bool chw;
};
absl::StatusOr<LaidOutImage> BindLayout(const Attrs& attrs, const ColumnSpec& spec, const char* op);

// The uint8 image [H,W,C] named by attr "field"; InvalidArgument otherwise.
absl::StatusOr<ImageDims> BindUint8Image(const Attrs& attrs, const Schema& schema, BoundField* f);

// The uint8 image [H,W], [H,W,1] or [H,W,3] named by attr "field" (the
// ops that take RGB or luma); InvalidArgument otherwise.
absl::StatusOr<std::pair<BoundField, ImageDims>> BindColorImage(const Attrs& attrs, const Schema& schema);

// The "fill" attr (one value, or one per channel; `what` it fills), and
// its pixel in `dtype`; InvalidArgument naming it when the count is neither.
AttrSchema FillAttr(const char* what);
absl::StatusOr<std::vector<uint8_t>> FillPixel(const std::vector<double>& fill, DType dtype, int64_t channels);

// An op instance that reads `column` and writes `out` (same name: in
// place), with `params` for its kernels.
template <typename P>
InferredOp UnaryOp(int column, ColumnSpec out, P params) {
  InferredOp op;
  op.inputs = {column};
  op.outputs = {std::move(out)};
  op.SetParams(std::move(params));
  return op;
}

// Calls f(T{}) with T the C++ type of `dtype` (uint8_t or float).
// REQUIRES: dtype is uint8 or float32.
template <typename F>
decltype(auto) DispatchImageType(DType dtype, F&& f) {
  if (dtype == DType::kUInt8) return f(uint8_t{});
  return f(float{});
}

}  // namespace sluice::ops

#endif  // SLUICE_OPS_FIELD_H_
