// The params and tables of the neighbourhood filters (gaussian_blur,
// grey_dilation), shared by the kernels of every backend (ops/cuda/ has
// both), so that they filter with the same taps and borders.
#ifndef SLUICE_OPS_IMAGE_FILTER_H_
#define SLUICE_OPS_IMAGE_FILTER_H_

#include <cstdint>
#include <vector>

#include "sluice/core/dtype.h"
#include "sluice/ops/field.h"

namespace sluice::ops {

struct FilterParams {
  DType dtype;
  ImageDims dims;
  int64_t kh, kw;
  float sigma_lo = 0, sigma_hi = 0;  // gaussian_blur
};

// For each of the n + 2r padded positions of an axis, the position it reads:
// reflected (reflect-101), or -1 (outside: the fill value) when `reflect` is
// false.
std::vector<int32_t> BorderMap(int64_t n, int64_t r, bool reflect);

// Normalized 1-D Gaussian taps at x = -(k-1)/2 .. (k-1)/2, as torchvision's
// and tfa's gaussian kernels (and OpenCV's getGaussianKernel for sigma > 0).
void GaussianTaps(int64_t k, float sigma, float* taps);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_IMAGE_FILTER_H_
