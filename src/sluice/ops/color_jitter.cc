// color_jitter and adjust_sharpness on uint8 images: torchvision's
// ColorJitter (brightness, contrast, saturation, hue in a random order) and
// RandomAdjustSharpness, with its tensor arithmetic step for step in float32
// (this file is compiled with -ffp-contract=off, so no product is fused
// into a sum where torch rounds it first), so the bytes are torchvision's.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/field.h"
#include "sluice/ops/luma.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using Lut = std::array<uint8_t, 256>;

// _blend of a level with `other`: ratio x + (1 - ratio) other in float32,
// clamped to [0, 255] and truncated.
inline uint8_t Blend(float ratio, float rest, uint8_t x, float other) {
  const float a = ratio * static_cast<float>(x);
  const float b = rest * other;
  return static_cast<uint8_t>(std::clamp(a + b, 0.f, 255.f));
}

// The two factors of _blend: ratio as float32, and 1 - ratio taken in double first.
struct BlendFactors {
  float ratio, rest;
  explicit BlendFactors(double r) : ratio(static_cast<float>(r)), rest(static_cast<float>(1.0 - r)) {}
};

void ApplyLut(const Lut& lut, int64_t n, uint8_t* img) {
  for (int64_t i = 0; i < n; ++i) img[i] = lut[img[i]];
}

void Brightness(double factor, const ImageDims& d, uint8_t* img) {
  const BlendFactors f(factor);
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = Blend(f.ratio, f.rest, static_cast<uint8_t>(v), 0.f);
  ApplyLut(lut, d.elems(), img);
}

// Blended with the mean of the image's luma (of its one channel).
void Contrast(double factor, const ImageDims& d, const Luma& luma, uint8_t* img) {
  const int64_t pixels = d.h * d.w;
  int64_t sum = 0;  // exact; torch's float32 sum is too while it stays below 2^24
  for (int64_t i = 0; i < pixels; ++i) sum += d.c == 3 ? luma(img + 3 * i) : img[i * d.c];
  const float mean = static_cast<float>(sum) / static_cast<float>(pixels);
  const BlendFactors f(factor);
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = Blend(f.ratio, f.rest, static_cast<uint8_t>(v), mean);
  ApplyLut(lut, d.elems(), img);
}

// Blended with each pixel's luma.
void Saturation(double factor, const ImageDims& d, const Luma& luma, uint8_t* img) {
  const BlendFactors f(factor);
  for (int64_t i = 0; i < d.h * d.w; ++i) {
    uint8_t* px = img + 3 * i;
    const float gray = luma(px);
    for (int ch = 0; ch < 3; ++ch) px[ch] = Blend(f.ratio, f.rest, px[ch], gray);
  }
}

// F.adjust_hue on uint8: to [0, 1] floats, _rgb2hsv, h shifted modulo 1,
// _hsv2rgb, times 255 truncated.
void Hue(double factor, const ImageDims& d, uint8_t* img) {
  const float shift = static_cast<float>(factor);
  for (int64_t i = 0; i < d.h * d.w; ++i) {
    uint8_t* px = img + 3 * i;
    const float r = px[0] / 255.0f, g = px[1] / 255.0f, b = px[2] / 255.0f;
    const float maxc = std::max({r, g, b}), minc = std::min({r, g, b});
    const bool eqc = maxc == minc;
    const float cr = maxc - minc;
    const float s = cr / (eqc ? 1.0f : maxc);
    const float divisor = eqc ? 1.0f : cr;
    const float rc = (maxc - r) / divisor, gc = (maxc - g) / divisor, bc = (maxc - b) / divisor;
    float h;
    if (maxc == r) {
      h = bc - gc;
    } else if (maxc == g) {
      h = (2.0f + rc) - bc;
    } else {
      h = (4.0f + gc) - rc;
    }
    h = std::fmod(h / 6.0f + 1.0f, 1.0f);
    h = h + shift;
    h = h - std::floor(h);  // torch's remainder by 1
    const float v = maxc;
    const float h6 = h * 6.0f;
    const float fi = std::floor(h6);
    const float f = h6 - fi;
    const float p = std::clamp(v * (1.0f - s), 0.0f, 1.0f);
    const float q = std::clamp(v * (1.0f - s * f), 0.0f, 1.0f);
    const float t = std::clamp(v * (1.0f - s * (1.0f - f)), 0.0f, 1.0f);
    float out[3];
    switch (((static_cast<int>(fi) % 6) + 6) % 6) {
      case 0: out[0] = v, out[1] = t, out[2] = p; break;
      case 1: out[0] = q, out[1] = v, out[2] = p; break;
      case 2: out[0] = p, out[1] = v, out[2] = t; break;
      case 3: out[0] = p, out[1] = q, out[2] = v; break;
      case 4: out[0] = t, out[1] = p, out[2] = v; break;
      default: out[0] = v, out[1] = p, out[2] = q;
    }
    for (int ch = 0; ch < 3; ++ch) px[ch] = static_cast<uint8_t>(out[ch] * 255.0f);
  }
}

struct JitterParams {
  ImageDims dims;
  // brightness, contrast, saturation, hue: each factor's range; off when absent.
  std::array<bool, 4> on;
  std::array<double, 4> lo, hi;
  Luma luma;
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
        if (k == 0) Brightness(factor[k], d, img);
        if (k == 1) Contrast(factor[k], d, p_.luma, img);
        if (k == 2 && d.c == 3) Saturation(factor[k], d, p_.luma, img);  // one channel: as it is, as PIL
        if (k == 3 && d.c == 3) Hue(factor[k], d, img);
      }
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

// The uint8 image column named by "field": [H,W], [H,W,1] or [H,W,3].
absl::StatusOr<std::pair<BoundField, ImageDims>> BindColorImage(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8}));
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, ImageDimsOf(f.spec));
  if (d.c != 1 && d.c != 3) {
    return AttrError("field", absl::StrCat("column '", f.spec.name, "' is ", f.spec.shape.ToString(),
                                           "; this op takes RGB or one-channel images"));
  }
  return std::make_pair(std::move(f), d);
}

absl::StatusOr<InferredOp> InferColorJitter(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(auto bound, BindColorImage(attrs, schema));
  JitterParams p{bound.second, {}, {}, {}, Luma()};
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

// F.adjust_sharpness: blended with the image whose interior is blurred by
// [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 (rounded to levels); the border
// rows and columns stay. Images of 2 pixels or less a side stay as they are.
class SharpnessKernel : public Kernel {
 public:
  using Params = SharpnessParams;
  explicit SharpnessKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const ImageDims& d = p_.dims;
    const int64_t stride = d.w * d.c;
    const float side = 1.0f / 13.0f, centre = 5.0f / 13.0f;
    const BlendFactors f(p_.factor);
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const uint8_t* src = in[0].row<const uint8_t>(r);
      uint8_t* dst = out[0].row<uint8_t>(r);
      const bool apply = d.h > 2 && d.w > 2 && (p_.p >= 1 || ctx.Rng(r).Bernoulli(p_.p));
      if (!apply) {
        std::memcpy(dst, src, in[0].row_bytes);
        continue;
      }
      for (int64_t y = 0; y < d.h; ++y) {
        for (int64_t x = 0; x < d.w; ++x) {
          for (int64_t ch = 0; ch < d.c; ++ch) {
            const int64_t i = y * stride + x * d.c + ch;
            float blurred = src[i];
            if (y > 0 && y + 1 < d.h && x > 0 && x + 1 < d.w) {
              float around = 0;
              for (int64_t dy = -1; dy <= 1; ++dy) {
                for (int64_t dx = -1; dx <= 1; ++dx) {
                  if (dy != 0 || dx != 0) around += side * src[i + dy * stride + dx * d.c];
                }
              }
              blurred = std::nearbyint(around + centre * src[i]);
            }
            dst[i] = Blend(f.ratio, f.rest, src[i], blurred);
          }
        }
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
