// Geometric ops: random_flip, random_rotation, random_zoom (affine warps that
// the graph can fuse, see warp.h) and hwc_to_chw.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/warp.h"

namespace sluice::ops {
namespace {

constexpr double kPi = 3.14159265358979323846;

class FlipKernel : public WarpKernel {
 public:
  FlipKernel(WarpSpec spec, bool horizontal, bool vertical)
      : WarpKernel(spec), horizontal_(horizontal), vertical_(vertical) {}

  // Draw 1 decides the horizontal flip, draw 2 the vertical one.
  void Decide(SampleRng& rng, bool* h, bool* v) const {
    const bool draw_h = rng.Bernoulli(0.5f);
    const bool draw_v = rng.Bernoulli(0.5f);
    *h = horizontal_ && draw_h;
    *v = vertical_ && draw_v;
  }

  Affine SampleMap(SampleRng& rng) const override {
    bool h, v;
    Decide(rng, &h, &v);
    const ImageDims& d = spec().dims;
    Affine a;
    if (h) a.m[0] = -1, a.m[2] = static_cast<float>(d.w - 1);
    if (v) a.m[4] = -1, a.m[5] = static_cast<float>(d.h - 1);
    return a;
  }

  // Alone, a flip moves whole pixels: copy them instead of resampling.
  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const ImageDims& d = spec().dims;
    const int64_t pixel = d.c * DTypeSize(spec().dtype);
    const int64_t row_bytes = d.w * pixel;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      SampleRng rng = ctx.Rng(r);
      bool h, v;
      Decide(rng, &h, &v);
      const uint8_t* src = in[0].row<const uint8_t>(r);
      uint8_t* dst = out[0].row<uint8_t>(r);
      for (int64_t y = 0; y < d.h; ++y) {
        const uint8_t* s = src + (v ? d.h - 1 - y : y) * row_bytes;
        uint8_t* o = dst + y * row_bytes;
        if (!h) {
          std::memcpy(o, s, row_bytes);
          continue;
        }
        for (int64_t x = 0; x < d.w; ++x) std::memcpy(o + x * pixel, s + (d.w - 1 - x) * pixel, pixel);
      }
    }
    return absl::OkStatus();
  }

 private:
  bool horizontal_, vertical_;
};

class RotationKernel : public WarpKernel {
 public:
  RotationKernel(WarpSpec spec, float lo_degrees, float hi_degrees)
      : WarpKernel(spec), lo_(lo_degrees), hi_(hi_degrees) {}
  // Rotation about the image centre by an angle drawn in [lo, hi] degrees.
  Affine SampleMap(SampleRng& rng) const override {
    const double theta = rng.Uniform(lo_, hi_) * kPi / 180.0;
    const double c = std::cos(theta), s = std::sin(theta);
    const double cx = (spec().dims.w - 1) / 2.0, cy = (spec().dims.h - 1) / 2.0;
    Affine a;
    a.m[0] = static_cast<float>(c);
    a.m[1] = static_cast<float>(-s);
    a.m[2] = static_cast<float>(cx - c * cx + s * cy);
    a.m[3] = static_cast<float>(s);
    a.m[4] = static_cast<float>(c);
    a.m[5] = static_cast<float>(cy - s * cx - c * cy);
    return a;
  }

 private:
  float lo_, hi_;
};

class ZoomKernel : public WarpKernel {
 public:
  ZoomKernel(WarpSpec spec, float lo, float hi) : WarpKernel(spec), lo_(lo), hi_(hi) {}
  // Magnification s about the centre: s > 1 enlarges the content.
  Affine SampleMap(SampleRng& rng) const override {
    const double inv = 1.0 / rng.Uniform(lo_, hi_);
    const double cx = (spec().dims.w - 1) / 2.0, cy = (spec().dims.h - 1) / 2.0;
    Affine a;
    a.m[0] = a.m[4] = static_cast<float>(inv);
    a.m[2] = static_cast<float>(cx - cx * inv);
    a.m[5] = static_cast<float>(cy - cy * inv);
    return a;
  }

 private:
  float lo_, hi_;
};

AttrSchema FillModeAttr() {
  return {"fill_mode", AttrType::kString, "\"reflect\"",
          "outside the image: \"reflect\" (dcba|abcd, Keras' default), \"nearest\" or "
          "\"constant\""};
}
AttrSchema FillValueAttr() {
  return {"fill_value", AttrType::kFloat, "0", "value used by fill_mode \"constant\""};
}

absl::StatusOr<WarpSpec> BindWarpSpec(const Attrs& attrs, const ColumnSpec& spec, bool has_fill) {
  SLUICE_ASSIGN_OR_RETURN(ImageDims dims, ImageDimsOf(spec));
  WarpSpec w{spec.dtype, dims, FillMode::kReflect, 0.f};
  if (!has_fill) return w;
  const std::string& mode = attrs.GetString("fill_mode");
  if (mode == "constant") {
    w.fill_mode = FillMode::kConstant;
  } else if (mode == "nearest") {
    w.fill_mode = FillMode::kNearest;
  } else if (mode != "reflect") {
    return AttrError("fill_mode", absl::StrCat("must be \"reflect\", \"nearest\" or \"constant\", got \"",
                                               mode, "\""));
  }
  w.fill_value = static_cast<float>(attrs.GetFloat("fill_value"));
  return w;
}

// A number x means [-x, x]; two numbers are [min, max].
absl::StatusOr<std::pair<double, double>> SymmetricRange(const Attrs& attrs, const char* name) {
  const std::vector<double>& v = attrs.GetFloats(name);
  if (v.size() == 1) return std::make_pair(-std::abs(v[0]), std::abs(v[0]));
  if (v.size() == 2 && v[0] <= v[1]) return std::make_pair(v[0], v[1]);
  return AttrError(name, "must be a number x (meaning [-x, x]) or [min, max] with min <= max");
}

OpBinding RandomBinding(const BoundField& f, std::shared_ptr<const Kernel> kernel) {
  OpBinding b = UnaryBinding(f.column, f.spec, std::move(kernel));
  b.random = true;
  return b;
}

absl::StatusOr<OpBinding> BindFlip(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
  SLUICE_ASSIGN_OR_RETURN(WarpSpec w, BindWarpSpec(attrs, f.spec, false));
  const std::string& mode = attrs.GetString("mode");
  const bool h = mode == "horizontal" || mode == "horizontal_and_vertical";
  const bool v = mode == "vertical" || mode == "horizontal_and_vertical";
  if (!h && !v) {
    return AttrError("mode", absl::StrCat("must be \"horizontal\", \"vertical\" or "
                                          "\"horizontal_and_vertical\", got \"", mode, "\""));
  }
  return RandomBinding(f, std::make_shared<FlipKernel>(w, h, v));
}

absl::StatusOr<OpBinding> BindRotation(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
  SLUICE_ASSIGN_OR_RETURN(WarpSpec w, BindWarpSpec(attrs, f.spec, true));
  SLUICE_ASSIGN_OR_RETURN(auto range, SymmetricRange(attrs, "degrees"));
  return RandomBinding(f, std::make_shared<RotationKernel>(w, static_cast<float>(range.first),
                                                           static_cast<float>(range.second)));
}

absl::StatusOr<OpBinding> BindZoom(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
  SLUICE_ASSIGN_OR_RETURN(WarpSpec w, BindWarpSpec(attrs, f.spec, true));
  const std::vector<double>& s = attrs.GetFloats("scale");
  if (s.size() != 2 || !(s[0] > 0) || s[1] < s[0]) {
    return AttrError("scale", "must be [min, max] with 0 < min <= max");
  }
  return RandomBinding(f, std::make_shared<ZoomKernel>(w, static_cast<float>(s[0]),
                                                       static_cast<float>(s[1])));
}

class HwcToChwKernel : public Kernel {
 public:
  HwcToChwKernel(ImageDims dims, size_t elem) : dims_(dims), elem_(elem) {}
  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const int64_t plane = dims_.h * dims_.w;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const uint8_t* src = in[0].row<const uint8_t>(r);
      uint8_t* dst = out[0].row<uint8_t>(r);
      for (int64_t ch = 0; ch < dims_.c; ++ch) {
        for (int64_t p = 0; p < plane; ++p) {
          std::memcpy(dst + (ch * plane + p) * elem_, src + (p * dims_.c + ch) * elem_, elem_);
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  ImageDims dims_;
  size_t elem_;
};

absl::StatusOr<OpBinding> BindHwcToChw(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(
      BoundField f,
      BindField(attrs, schema, {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32}));
  if (f.spec.shape.rank() != 3) {
    return AttrError("field", absl::StrCat("column '", f.spec.name, "' is ", f.spec.shape.ToString(),
                                           "; hwc_to_chw needs [H,W,C]"));
  }
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, ImageDimsOf(f.spec));
  ColumnSpec out = f.spec;
  out.shape = Shape{d.c, d.h, d.w};
  return UnaryBinding(f.column, out, std::make_shared<HwcToChwKernel>(d, DTypeSize(f.spec.dtype)));
}

}  // namespace

void RegisterGeometryOps(OpRegistry* registry) {
  registry->Register(OpSchema{
      "random_flip",
      "Flips each sample with probability 1/2 per direction (Keras' RandomFlip).",
      {FieldAttr(),
       {"mode", AttrType::kString, "\"horizontal\"",
        "\"horizontal\", \"vertical\" or \"horizontal_and_vertical\""}},
      true,
      false,
      BindFlip});
  registry->Register(OpSchema{
      "random_rotation",
      "Rotates each sample about its centre by an angle drawn uniformly per sample, with "
      "bilinear interpolation. Keras' RandomRotation(0.1) is degrees 36 (0.1 of a turn).",
      {FieldAttr(),
       {"degrees", AttrType::kFloats, "", "x for [-x, x], or [min, max]"},
       FillModeAttr(),
       FillValueAttr()},
      true,
      false,
      BindRotation});
  registry->Register(OpSchema{
      "random_zoom",
      "Scales each sample about its centre by a magnification drawn uniformly per sample "
      "(> 1 enlarges), with bilinear interpolation. Keras' RandomZoom(0.1) is about "
      "scale [0.9, 1.1].",
      {FieldAttr(),
       {"scale", AttrType::kFloats, "", "[min, max] magnification"},
       FillModeAttr(),
       FillValueAttr()},
      true,
      false,
      BindZoom});
  registry->Register(OpSchema{
      "hwc_to_chw",
      "Transposes an [H,W,C] sample to [C,H,W] (the layout torch models take).",
      {FieldAttr()},
      false,
      false,
      BindHwcToChw});
}

}  // namespace sluice::ops
