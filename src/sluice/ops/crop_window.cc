#include "sluice/ops/crop_window.h"

#include <cmath>

#include "sluice/ops/attrs.h"

namespace sluice::ops {

using kernels::Window;

Window RandomResizedCropWindow(int width, int height, SampleRng& rng, double scale_lo, double scale_hi, double ratio_lo,
                               double ratio_hi) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(ratio_lo), log_hi = std::log(ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.Uniform(static_cast<float>(scale_lo), static_cast<float>(scale_hi));
    const double aspect = std::exp(rng.Uniform(static_cast<float>(log_lo), static_cast<float>(log_hi)));
    const int w = static_cast<int>(PythonRound(std::sqrt(target * aspect)));
    const int h = static_cast<int>(PythonRound(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int i = static_cast<int>(rng.NextU32() % static_cast<uint32_t>(height - h + 1));
      const int j = static_cast<int>(rng.NextU32() % static_cast<uint32_t>(width - w + 1));
      return Window{static_cast<double>(j), static_cast<double>(i), static_cast<double>(w), static_cast<double>(h),
                    /*inside=*/true};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  double w = width, h = height;
  if (in_ratio < ratio_lo) {
    h = PythonRound(w / ratio_lo);
  } else if (in_ratio > ratio_hi) {
    w = PythonRound(h * ratio_hi);
  }
  return Window{std::floor((width - w) / 2), std::floor((height - h) / 2), w, h, /*inside=*/true};
}

Window PickWindow(const CropSpec& spec, int width, int height, const KernelContext& ctx, int64_t row) {
  switch (spec.kind) {
    case CropSpec::Kind::kWhole:
      break;
    case CropSpec::Kind::kRandomResized: {
      SampleRng rng = ctx.Rng(row);
      return RandomResizedCropWindow(width, height, rng, spec.scale_lo, spec.scale_hi, spec.ratio_lo, spec.ratio_hi);
    }
    case CropSpec::Kind::kResizeCenter: {
      const bool wide = width >= height;
      const double short_side = wide ? height : width;
      const double long_side = wide ? width : height;
      const double resized_long = std::floor(spec.resize * long_side / short_side);
      const double rw = wide ? resized_long : spec.resize, rh = wide ? spec.resize : resized_long;
      const double top = CenterOffset(rh, spec.crop_h), left = CenterOffset(rw, spec.crop_w);
      const double sx = width / rw, sy = height / rh;
      return Window{left * sx, top * sy, spec.crop_w * sx, spec.crop_h * sy};
    }
  }
  return Window{0, 0, static_cast<double>(width), static_cast<double>(height)};
}

AttrSchema ImageSizeAttr(const char* name, const char* default_json) {
  return AttrSchema{name, AttrType::kInts, default_json, "[height, width] or [size] of the output"}.Count(1, 2).Range(
      1, 65535);
}

std::pair<int, int> ImageSize(const Attrs& attrs, absl::string_view name) {
  const std::vector<int64_t>& v = attrs.GetInts(name);
  return {static_cast<int>(v.front()), static_cast<int>(v.back())};
}

std::vector<AttrSchema> RandomResizedCropAttrs() {
  return {ImageSizeAttr("size", "[224]"),
          AttrSchema{"scale", AttrType::kFloats, "[0.08, 1.0]", "range of the crop's share of the image's area"}
              .Count(2, 2)
              .Above(0),
          AttrSchema{"ratio", AttrType::kFloats, "[0.75, 1.3333333333333333]", "range of the crop's width / height"}
              .Count(2, 2)
              .Above(0)};
}

absl::StatusOr<CropSpec> RandomResizedCropSpec(const Attrs& attrs) {
  const std::vector<double>& scale = attrs.GetFloats("scale");
  const std::vector<double>& ratio = attrs.GetFloats("ratio");
  if (scale[1] < scale[0] || scale[1] > 1) return AttrError("scale", "must be [min, max] with 0 < min <= max <= 1");
  if (ratio[1] < ratio[0]) return AttrError("ratio", "must be [min, max] with 0 < min <= max");
  CropSpec spec;
  spec.kind = CropSpec::Kind::kRandomResized;
  spec.scale_lo = scale[0];
  spec.scale_hi = scale[1];
  spec.ratio_lo = ratio[0];
  spec.ratio_hi = ratio[1];
  return spec;
}

}  // namespace sluice::ops
