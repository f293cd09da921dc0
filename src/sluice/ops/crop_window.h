// Where torchvision's crops fall: the window of RandomResizedCrop and the
// offsets of CenterCrop, shared by the fused decode ops and the ops on
// decoded images.
#ifndef SLUICE_OPS_CROP_WINDOW_H_
#define SLUICE_OPS_CROP_WINDOW_H_

#include <cmath>

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/ops/attrs.h"
#include "sluice/core/rng.h"
#include "sluice/ops/field.h"
#include "sluice/ops/image_decoder.h"

namespace sluice::ops {

// RandomResizedCrop.get_params: ten tries at an area (a share in [scale_lo,
// scale_hi] of the image's) and an aspect ratio (log-uniform in [ratio_lo,
// ratio_hi]) that fit, at a uniform position; else the whole image cut to
// the nearest allowed ratio, centred.
Window RandomResizedCropWindow(int width, int height, SampleRng& rng, double scale_lo, double scale_hi,
                               double ratio_lo, double ratio_hi);

// InvalidArgument naming the attr unless scale is [min, max] with
// 0 < min <= max <= 1 and ratio is [min, max] with 0 < min <= max.
absl::Status CheckRandomResizedCropRanges(const std::vector<double>& scale, const std::vector<double>& ratio);

// Attr `name` as (height, width): [height, width], or [size] for a square;
// each in 1..65535. InvalidArgument naming the attr otherwise.
absl::StatusOr<std::pair<int, int>> ImageSizeAttr(const Attrs& attrs, absl::string_view name);

// The attrs of a random resized crop: size, scale, ratio.
std::vector<AttrSchema> RandomResizedCropAttrs();

// CenterCrop's top and left: rounded halves of the margins.
inline double CenterOffset(double size, double crop) { return std::round((size - crop) / 2.0); }

// (top, left) of an h x w centre crop of an image of `d`'s size.
inline std::pair<int64_t, int64_t> CenterOffsets(const ImageDims& d, int64_t h, int64_t w) {
  return {static_cast<int64_t>(CenterOffset(static_cast<double>(d.h), static_cast<double>(h))),
          static_cast<int64_t>(CenterOffset(static_cast<double>(d.w), static_cast<double>(w)))};
}

}  // namespace sluice::ops

#endif  // SLUICE_OPS_CROP_WINDOW_H_
