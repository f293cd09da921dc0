// The params of the neighbourhood filters (gaussian_blur, grey_dilation),
// shared by the kernels of every backend (ops/cuda/image_filter.cc); both
// take their taps and borders from kernels/image_filter.h.
#ifndef SLUICE_OPS_IMAGE_FILTER_PARAMS_H_
#define SLUICE_OPS_IMAGE_FILTER_PARAMS_H_

#include <cstdint>

#include "sluice/core/dtype.h"
#include "sluice/ops/field.h"

namespace sluice::ops {

struct FilterParams {
  DType dtype;
  ImageDims dims;
  int64_t kh, kw;
  float sigma_lo = 0, sigma_hi = 0;  // gaussian_blur
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_IMAGE_FILTER_PARAMS_H_
