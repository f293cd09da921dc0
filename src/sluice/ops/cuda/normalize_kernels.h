// Launchers of the cuda kernels of crop_mirror_normalize and center_crop
// (its uint8 copy): plain C++ declarations, so that the kernel classes compile
// with the host compiler and only the launchers with nvcc.
#ifndef SLUICE_OPS_CUDA_NORMALIZE_KERNELS_H_
#define SLUICE_OPS_CUDA_NORMALIZE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "sluice/ops/cuda/elem_type.h"

namespace sluice::ops::cuda {

// Where each sample's output comes from: an h x w window at (top, left) of
// an in_h x in_w x channels uint8 image, written CHW or HWC.
struct CropLayout {
  int64_t in_h, in_w, channels;
  int64_t top, left, h, w;
  bool chw;
  int64_t in_row_bytes, out_row_bytes;  // between consecutive samples
};

// out[c][y][x] (or [y][x][c]) = a[c] * in[top + y][left + x'][c] + b[c] as
// one fused multiply-add, x' = w - 1 - x for a mirrored sample, for `rows`
// samples. `out_type` is float32 or float16 (rounded to nearest even), or
// uint8: the levels copied, a and b unused (may be null). A sample is
// mirrored when mirror[r] != 0, or, with mirror null, when `mirror_all`.
// a, b and mirror are device memory.
cudaError_t LaunchCropMirrorNormalize(const uint8_t* in, int64_t rows, const CropLayout& layout, const float* a,
                                      const float* b, const uint8_t* mirror, bool mirror_all, ElemType out_type,
                                      uint8_t* out, cudaStream_t stream);

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_NORMALIZE_KERNELS_H_
