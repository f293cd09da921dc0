// Ops on decoded uint8 images of a fixed size: resize, random_resized_crop
// and center_crop (crop_mirror_normalize is in normalize.cc).
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/resample.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/field.h"
#include "sluice/ops/image_crop_params.h"
#include "sluice/ops/normalize_params.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::ResampleBilinear;
using kernels::Window;

// A window of each image (all of it, or a random one), resampled to h x w.
class ResampleKernel : public Kernel {
 public:
  using Params = ResampleParams;
  explicit ResampleKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const ImageDims& d = p_.in;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const Window window = PickWindow(p_.window, static_cast<int>(d.w), static_cast<int>(d.h), ctx, r);
      ResampleBilinear(in[0].row<uint8_t>(r), static_cast<int>(d.w), static_cast<int>(d.h), static_cast<int>(d.c),
                       d.row_elems(), window, out[0].row<uint8_t>(r), static_cast<int>(p_.w), static_cast<int>(p_.h));
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

// The image column named by "field", resized to attr "size" through `window`.
absl::StatusOr<InferredOp> InferResample(const Attrs& attrs, const Schema& schema, CropSpec window) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, BindUint8Image(attrs, schema, &f));
  const auto [h, w] = ImageSize(attrs, "size");
  ColumnSpec out = f.spec;
  out.shape = Shape{h, w, d.c};
  InferredOp op = UnaryOp(f.column, out, ResampleParams{d, h, w, window});
  op.random = window.kind == CropSpec::Kind::kRandomResized;
  return op;
}

absl::StatusOr<InferredOp> InferResize(const Attrs& attrs, const Schema& schema) {
  return InferResample(attrs, schema, CropSpec{});
}

absl::StatusOr<InferredOp> InferRandomResizedCrop(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(CropSpec window, RandomResizedCropSpec(attrs));
  return InferResample(attrs, schema, window);
}

class CenterCropKernel : public Kernel {
 public:
  using Params = CenterCropParams;
  explicit CenterCropKernel(const Params& p) : in_(p.in), h_(p.h), w_(p.w) {}
  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const auto [top, left] = CenterOffsets(in_, h_, w_);
    const int64_t row_bytes = w_ * in_.c;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const uint8_t* src = in[0].row<uint8_t>(r) + (top * in_.w + left) * in_.c;
      uint8_t* dst = out[0].row<uint8_t>(r);
      for (int64_t y = 0; y < h_; ++y) std::memcpy(dst + y * row_bytes, src + y * in_.row_elems(), row_bytes);
    }
    return absl::OkStatus();
  }

 private:
  const ImageDims in_;
  const int64_t h_, w_;
};

absl::StatusOr<InferredOp> InferCenterCrop(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, BindUint8Image(attrs, schema, &f));
  const auto [h, w] = ImageSize(attrs, "size");
  if (h > d.h || w > d.w) {
    return AttrError("size", absl::StrCat("[", h, ", ", w, "] is larger than the image, ", f.spec.shape.ToString()));
  }
  ColumnSpec out = f.spec;
  out.shape = Shape{h, w, d.c};
  return UnaryOp(f.column, out, CenterCropParams{d, h, w});
}

}  // namespace

absl::Status RegisterImageCropOps(OpRegistry* registry) {
  const char* kImage = "uint8 image [H,W,C]";
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("resize")
          .Doc("Resizes uint8 images [H,W,C] to `size` with bilinear filtering, antialiased when shrinking (PIL's "
               "and torchvision's).")
          .Attr(FieldAttr())
          .Attr(ImageSizeAttr("size", ""))
          .Input("field", kImage)
          .Output("field", "uint8 [height,width,C]")
          .Infer(InferResize)));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<ResampleKernel>("resize", Backend::kCpu));
  OpSchema rrc("random_resized_crop");
  rrc.Doc(
         "A random crop of each decoded uint8 image [H,W,C], resized to `size`: torchvision's RandomResizedCrop "
         "(decode_random_resized_crop does the same inside the decoder, faster).")
      .Attr(FieldAttr());
  for (AttrSchema& a : RandomResizedCropAttrs()) rrc.Attr(std::move(a));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(std::move(
      rrc.Input("field", kImage).Output("field", "uint8 [height,width,C]").Random().Infer(InferRandomResizedCrop))));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<ResampleKernel>("random_resized_crop", Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(
      registry->AddOp(OpSchema("center_crop")
                          .Doc("The centre `size` of uint8 images [H,W,C] (torchvision's CenterCrop).")
                          .Attr(FieldAttr())
                          .Attr(ImageSizeAttr("size", ""))
                          .Input("field", kImage)
                          .Output("field", "uint8 [height,width,C]")
                          .Infer(InferCenterCrop)));
  return registry->AddKernel<CenterCropKernel>("center_crop", Backend::kCpu);
}

}  // namespace sluice::ops
