// The params of resize and random_resized_crop on decoded uint8 images,
// shared by their cpu kernel (image_crop.cc) and cuda kernel.
#ifndef SLUICE_OPS_IMAGE_CROP_PARAMS_H_
#define SLUICE_OPS_IMAGE_CROP_PARAMS_H_

#include <cstdint>

#include "sluice/ops/crop_window.h"
#include "sluice/ops/field.h"

namespace sluice::ops {

// A window of each `in` image (all of it, or a random one), resampled to
// h x w.
struct ResampleParams {
  ImageDims in;
  int64_t h, w;
  CropSpec window;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_IMAGE_CROP_PARAMS_H_
