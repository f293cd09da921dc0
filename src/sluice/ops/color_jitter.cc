// color_jitter and adjust_sharpness on uint8 images: torchvision's
// ColorJitter (brightness, contrast, saturation, hue in a random order) and
// RandomAdjustSharpness, with its arithmetic (image_adjust.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/image_adjust.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::AdjustBrightness;
using kernels::AdjustContrast;
using kernels::AdjustHue;
using kernels::AdjustSaturation;
using kernels::AdjustSharpness;

struct JitterParams {
  ImageDims dims;
  // brightness, contrast, saturation, hue: each factor's range; off when absent.
  std::array<bool, 4> on;
  std::array<double, 4> lo, hi;
};

class ColorJitterKernel : public Kernel {
 public:
  using Params = JitterParams;
  explicit ColorJitterKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const ImageDims& d = p_.dims;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      uint8_t* img = out[0].row<uint8_t>(r);
      std::memcpy(img, in[0].row<const uint8_t>(r), in[0].row_bytes);
      // ColorJitter.get_params: an order of the four, then each factor drawn.
      SampleRng rng = ctx.Rng(r);
      std::array<int, 4> order = {0, 1, 2, 3};
      for (int i = 3; i > 0; --i) std::swap(order[i], order[rng.NextU32() % static_cast<uint32_t>(i + 1)]);
      std::array<double, 4> factor{};
      for (int k = 0; k < 4; ++k) {
        if (p_.on[k]) factor[k] = rng.Uniform(static_cast<float>(p_.lo[k]), static_cast<float>(p_.hi[k]));
      }
      for (int k : order) {
        if (!p_.on[k]) continue;
        if (k == 0) AdjustBrightness(factor[k], d, img);
        if (k == 1) AdjustContrast(factor[k], d, img);
        if (k == 2) AdjustSaturation(factor[k], d, img);  // one channel: as it is, as PIL
        if (k == 3) AdjustHue(factor[k], d, img);
      }
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

absl::StatusOr<InferredOp> InferColorJitter(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(auto bound, BindColorImage(attrs, schema));
  JitterParams p{bound.second, {}, {}, {}};
  const char* names[4] = {"brightness", "contrast", "saturation", "hue"};
  for (int k = 0; k < 4; ++k) {
    const std::vector<double>& v = attrs.GetFloats(names[k]);
    // ColorJitter._check_input: x means [1 - x, 1 + x] (from 0), for hue [-x, x].
    const double center = k == 3 ? 0 : 1;
    double lo = v.size() == 1 ? center - v[0] : v[0], hi = v.size() == 1 ? center + v[0] : v[1];
    if (v.size() == 1 && v[0] < 0) return AttrError(names[k], "must be >= 0 (a single value x means [1 - x, 1 + x])");
    if (k < 3) lo = std::max(lo, 0.0);
    if (lo > hi) return AttrError(names[k], "must be [min, max] with min <= max");
    if (k < 3 && v.size() == 2 && v[0] < 0) return AttrError(names[k], "factors must be >= 0");
    if (k == 3 && (lo < -0.5 || hi > 0.5)) return AttrError(names[k], "must lie in [-0.5, 0.5]");
    p.on[k] = !(lo == center && hi == center);
    p.lo[k] = lo, p.hi[k] = hi;
  }
  InferredOp op = UnaryOp(bound.first.column, bound.first.spec, std::move(p));
  op.random = true;
  return op;
}

struct SharpnessParams {
  ImageDims dims;
  double factor;
  float p;
};

// F.adjust_sharpness with probability p.
class SharpnessKernel : public Kernel {
 public:
  using Params = SharpnessParams;
  explicit SharpnessKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const uint8_t* src = in[0].row<const uint8_t>(r);
      uint8_t* dst = out[0].row<uint8_t>(r);
      if (p_.p >= 1 || ctx.Rng(r).Bernoulli(p_.p)) {
        AdjustSharpness(p_.factor, p_.dims, src, dst);
      } else {
        std::memcpy(dst, src, in[0].row_bytes);
      }
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

absl::StatusOr<InferredOp> InferSharpness(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8}));
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, ImageDimsOf(f.spec));
  const float p = static_cast<float>(attrs.GetFloat("p"));
  InferredOp op = UnaryOp(f.column, f.spec, SharpnessParams{d, attrs.GetFloat("sharpness_factor"), p});
  op.random = p < 1;
  return op;
}

AttrSchema FactorAttr(const char* name, const char* doc) {
  return AttrSchema{name, AttrType::kFloats, "0", doc}.Count(1, 2);
}

}  // namespace

absl::Status RegisterColorJitterOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("color_jitter")
          .Doc("torchvision's ColorJitter on uint8 images: brightness, contrast, saturation and hue factors drawn "
               "per sample, applied in an order drawn per sample; each computed as torchvision computes it.")
          .Attr(FieldAttr())
          .Attr(FactorAttr("brightness", "x for factors in [max(0, 1 - x), 1 + x], or [min, max]; 0: off"))
          .Attr(FactorAttr("contrast", "x for [max(0, 1 - x), 1 + x] (blend with the mean luma), or [min, max]"))
          .Attr(FactorAttr("saturation", "x for [max(0, 1 - x), 1 + x] (blend with each pixel's luma), or [min, max]"))
          .Attr(FactorAttr("hue", "x for shifts in [-x, x] of a turn (x <= 0.5), or [min, max]"))
          .Input("field", "uint8 image [H,W,3], or one channel (saturation and hue leave it)")
          .Output("field", "the same")
          .Random()
          .Infer(InferColorJitter)));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<ColorJitterKernel>("color_jitter", Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("adjust_sharpness")
          .Doc("torchvision's adjust_sharpness (RandomAdjustSharpness with p): a blend of each uint8 image with "
               "its smoothed interior; factor 0 smooths, 1 keeps, 2 sharpens.")
          .Attr(FieldAttr())
          .Attr(AttrSchema{"sharpness_factor", AttrType::kFloat, "", "the blend's factor"}.AtLeast(0))
          .Attr(AttrSchema{"p", AttrType::kFloat, "1", "probability of changing each image"}.Range(0, 1))
          .Input("field", "uint8 image [H,W] or [H,W,C]")
          .Output("field", "the same")
          .Random()
          .Infer(InferSharpness)));
  return registry->AddKernel<SharpnessKernel>("adjust_sharpness", Backend::kCpu);
}

}  // namespace sluice::ops
