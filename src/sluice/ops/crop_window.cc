#include "sluice/ops/crop_window.h"

#include <cmath>

#include "sluice/ops/attrs.h"

namespace sluice::ops {

Window RandomResizedCropWindow(int width, int height, SampleRng& rng, double scale_lo, double scale_hi,
                               double ratio_lo, double ratio_hi) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(ratio_lo), log_hi = std::log(ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.Uniform(static_cast<float>(scale_lo), static_cast<float>(scale_hi));
    const double aspect = std::exp(rng.Uniform(static_cast<float>(log_lo), static_cast<float>(log_hi)));
    const int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int i = static_cast<int>(rng.NextU32() % static_cast<uint32_t>(height - h + 1));
      const int j = static_cast<int>(rng.NextU32() % static_cast<uint32_t>(width - w + 1));
      return Window{static_cast<double>(j), static_cast<double>(i), static_cast<double>(w), static_cast<double>(h)};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  double w = width, h = height;
  if (in_ratio < ratio_lo) {
    h = std::lround(w / ratio_lo);
  } else if (in_ratio > ratio_hi) {
    w = std::lround(h * ratio_hi);
  }
  return Window{std::floor((width - w) / 2), std::floor((height - h) / 2), w, h};
}

absl::StatusOr<std::pair<int, int>> ImageSizeAttr(const Attrs& attrs, absl::string_view name) {
  const std::vector<int64_t>& v = attrs.GetInts(name);
  if ((v.size() == 1 || v.size() == 2) && v.front() > 0 && v.back() > 0 && v.front() <= 65535 && v.back() <= 65535) {
    return std::make_pair(static_cast<int>(v.front()), static_cast<int>(v.back()));
  }
  return AttrError(name, "must be [height, width] or [size], each in 1..65535");
}

std::vector<AttrSchema> RandomResizedCropAttrs() {
  return {{"size", AttrType::kInts, "[224]", "[height, width] or [size] of the output"},
          {"scale", AttrType::kFloats, "[0.08, 1.0]", "range of the crop's share of the image's area"},
          {"ratio", AttrType::kFloats, "[0.75, 1.3333333333333333]", "range of the crop's width / height"}};
}

absl::Status CheckRandomResizedCropRanges(const std::vector<double>& scale, const std::vector<double>& ratio) {
  if (scale.size() != 2 || !(scale[0] > 0) || scale[1] < scale[0] || scale[1] > 1) {
    return AttrError("scale", "must be [min, max] with 0 < min <= max <= 1");
  }
  if (ratio.size() != 2 || !(ratio[0] > 0) || ratio[1] < ratio[0]) {
    return AttrError("ratio", "must be [min, max] with 0 < min <= max");
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops
