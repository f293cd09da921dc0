// random_cutout: the Cutout augmentation (DeVries & Taylor, 2017) as a
// sluice plugin op. Each sample, with probability `p`, gets a `size` patch
// centred on a uniformly drawn pixel set to `value` (the patch may hang
// over the border, as in the paper). Draws come from the sample's own
// stream, so a seed gives the same patches with any thread count, in any
// order, on any worker.
#include <algorithm>
#include <cstring>

#include "sluice/sluice.h"

namespace {

using sluice::DType;
using sluice::ops::AttrSchema;
using sluice::ops::AttrType;

struct CutoutParams {
  DType dtype;
  sluice::ImageDims dims;
  int64_t patch_h, patch_w;
  float p, value;
};

class CutoutKernel : public sluice::ops::Kernel {
 public:
  using Params = CutoutParams;
  explicit CutoutKernel(const Params& p) : p_(p) {}

  absl::Status Run(const sluice::ops::KernelContext& ctx, absl::Span<const sluice::ops::ColumnRef> in,
                   absl::Span<const sluice::ops::ColumnRef> out) const override {
    const sluice::ImageDims& d = p_.dims;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      std::memcpy(out[0].row<uint8_t>(r), in[0].row<uint8_t>(r), static_cast<size_t>(out[0].row_bytes));
      sluice::SampleRng rng = ctx.Rng(r);
      if (!rng.Bernoulli(p_.p)) continue;
      const int64_t cy = rng.NextU32() % static_cast<uint32_t>(d.h);
      const int64_t cx = rng.NextU32() % static_cast<uint32_t>(d.w);
      const int64_t y0 = std::max<int64_t>(0, cy - p_.patch_h / 2),
                    y1 = std::min(d.h, cy - p_.patch_h / 2 + p_.patch_h);
      const int64_t x0 = std::max<int64_t>(0, cx - p_.patch_w / 2),
                    x1 = std::min(d.w, cx - p_.patch_w / 2 + p_.patch_w);
      if (p_.dtype == DType::kUInt8) {
        Fill(out[0].row<uint8_t>(r), y0, y1, x0, x1, static_cast<uint8_t>(std::clamp(p_.value, 0.f, 255.f)));
      } else {
        Fill(out[0].row<float>(r), y0, y1, x0, x1, p_.value);
      }
    }
    return absl::OkStatus();
  }

 private:
  template <typename T>
  void Fill(T* image, int64_t y0, int64_t y1, int64_t x0, int64_t x1, T value) const {
    for (int64_t y = y0; y < y1; ++y) {
      std::fill(image + (y * p_.dims.w + x0) * p_.dims.c, image + (y * p_.dims.w + x1) * p_.dims.c, value);
    }
  }

  const Params p_;
};

absl::StatusOr<sluice::ops::InferredOp> InferCutout(const sluice::ops::Attrs& attrs, const sluice::Schema& input) {
  SLUICE_ASSIGN_OR_RETURN(sluice::ops::BoundField f,
                          sluice::ops::BindField(attrs, input, {DType::kUInt8, DType::kFloat32}));
  SLUICE_ASSIGN_OR_RETURN(sluice::ImageDims dims, sluice::ops::ImageDimsOf(f.spec));
  const std::vector<int64_t>& size = attrs.GetInts("size");
  const int64_t h = size.front(), w = size.back();
  if (h > dims.h || w > dims.w) {
    return sluice::ops::AttrError("size", "is larger than the image " + f.spec.shape.ToString());
  }
  sluice::ops::InferredOp op =
      sluice::ops::UnaryOp(f.column, f.spec,
                           CutoutParams{f.spec.dtype, dims, h, w, static_cast<float>(attrs.GetFloat("p")),
                                        static_cast<float>(attrs.GetFloat("value"))});
  op.random = true;
  return op;
}

absl::Status RegisterCutout(sluice::ops::PluginRegistrar& r) {
  SLUICE_RETURN_IF_ERROR(r.AddOp(
      sluice::ops::OpSchema("random_cutout")
          .Doc("Cutout: with probability p, a size patch centred on a random pixel of each sample is set to "
               "value (it may hang over the border).")
          .Attr(sluice::ops::FieldAttr())
          .Attr(
              AttrSchema{"size", AttrType::kInts, "[8]", "[height, width] or [side] of the patch"}.Count(1, 2).AtLeast(
                  1))
          .Attr(AttrSchema{"p", AttrType::kFloat, "1", "probability of a patch"}.Range(0, 1))
          .Attr(AttrSchema{"value", AttrType::kFloat, "0", "what the patch is set to"})
          .Input("field", "uint8 or float32 image [H,W] or [H,W,C]")
          .Output("field", "the same shape and dtype")
          .Random()
          .Infer(InferCutout)));
  return r.AddKernel<CutoutKernel>("random_cutout", sluice::ops::Backend::kCpu);
}

}  // namespace

SLUICE_PLUGIN(RegisterCutout)
