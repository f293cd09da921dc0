// Where torchvision's crops fall: the window of RandomResizedCrop and the
// offsets of CenterCrop, shared by the fused decode ops and the ops on
// decoded images.
#ifndef SLUICE_OPS_CROP_WINDOW_H_
#define SLUICE_OPS_CROP_WINDOW_H_

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/core/rng.h"
#include "sluice/kernels/image_decoder.h"
#include "sluice/ops/attrs.h"
#include "sluice/ops/field.h"
#include "sluice/ops/kernel.h"
#include "sluice/ops/python_round.h"

namespace sluice::ops {

// How an op picks, for each image, the window that becomes its output.
struct CropSpec {
  enum class Kind {
    kWhole,          // all of the image
    kRandomResized,  // torchvision's RandomResizedCrop
    kResizeCenter,   // torchvision's Resize(resize) then CenterCrop(crop_h, crop_w)
  };
  Kind kind = Kind::kWhole;
  double scale_lo = 0, scale_hi = 0, ratio_lo = 0, ratio_hi = 0;  // kRandomResized
  int64_t resize = 0;                                             // kResizeCenter
  int crop_h = 0, crop_w = 0;                                     // kResizeCenter
};

// The window of a width x height image that row `row` of `ctx` gets (a
// random one draws from the row's stream).
kernels::Window PickWindow(const CropSpec& spec, int width, int height, const KernelContext& ctx, int64_t row);

// The kRandomResized spec of attrs "scale" and "ratio" (RandomResizedCropAttrs);
// InvalidArgument naming the attr when a range is reversed.
absl::StatusOr<CropSpec> RandomResizedCropSpec(const Attrs& attrs);

// RandomResizedCrop.get_params: ten tries at an area (a share in [scale_lo,
// scale_hi] of the image's) and an aspect ratio (log-uniform in [ratio_lo,
// ratio_hi]) that fit, at a uniform position; else the whole image cut to
// the nearest allowed ratio, centred.
kernels::Window RandomResizedCropWindow(int width, int height, SampleRng& rng, double scale_lo, double scale_hi,
                                        double ratio_lo, double ratio_hi);

// An image size attr: [height, width] or [size], each in 1..65535.
AttrSchema ImageSizeAttr(const char* name, const char* default_json);
// Attr `name` (an ImageSizeAttr) as (height, width).
std::pair<int, int> ImageSize(const Attrs& attrs, absl::string_view name);

// The attrs of a random resized crop: size, scale, ratio.
std::vector<AttrSchema> RandomResizedCropAttrs();

// CenterCrop's top and left: int(round(margin / 2)) in Python.
inline double CenterOffset(double size, double crop) { return PythonRound((size - crop) / 2.0); }

// (top, left) of an h x w centre crop of an image of `d`'s size.
inline std::pair<int64_t, int64_t> CenterOffsets(const ImageDims& d, int64_t h, int64_t w) {
  return {static_cast<int64_t>(CenterOffset(static_cast<double>(d.h), static_cast<double>(h))),
          static_cast<int64_t>(CenterOffset(static_cast<double>(d.w), static_cast<double>(w)))};
}

// center_crop's params, shared by its cpu kernel (image_crop.cc) and cuda
// kernel: the centre h x w of each `in` image.
struct CenterCropParams {
  ImageDims in;
  int64_t h, w;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_CROP_WINDOW_H_
