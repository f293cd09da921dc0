// Where crop_mirror_normalize's and center_crop's cuda kernels read each
// sample's centre window, placed as the cpu kernels place it.
#ifndef SLUICE_OPS_CUDA_CROP_LAYOUT_H_
#define SLUICE_OPS_CUDA_CROP_LAYOUT_H_

#include <cstdint>

#include "sluice/ops/crop_window.h"
#include "sluice/ops/cuda/normalize_kernels.h"
#include "sluice/ops/kernel.h"

namespace sluice::ops::cuda {

// The centre h x w window of `in` images, as the cpu kernels place it.
inline CropLayout CenterCropLayout(const ImageDims& in, int64_t h, int64_t w, bool chw, const ColumnRef& src,
                                   const ColumnRef& dst) {
  const auto [top, left] = CenterOffsets(in, h, w);
  return CropLayout{in.h, in.w, in.c, top, left, h, w, chw, src.row_bytes, dst.row_bytes};
}

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_CROP_LAYOUT_H_
