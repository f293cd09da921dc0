// Launchers of the cuda kernels of the neighbourhood filters (image_filter_params.h):
// plain C++ declarations, so that the kernel classes compile with the host
// compiler and only the launchers with nvcc.
#ifndef SLUICE_OPS_CUDA_IMAGE_FILTER_KERNELS_H_
#define SLUICE_OPS_CUDA_IMAGE_FILTER_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sluice::ops::cuda {

// A batch of `rows` images [h, w, c] of uint8 or float32, filtered as the cpu
// kernels do: a horizontal pass (kw taps) into float, then a vertical pass
// (kh taps), uint8 results rounded to nearest and saturated. Padded position
// p of an axis reads position xmap[p] (x: w + kw - 1 entries) or ymap[p]
// (y: h + kh - 1 entries), or `fill` where that is -1. All pointers are
// device memory.
struct FilterBatch {
  const uint8_t* in;
  uint8_t* out;
  bool is_float;
  int64_t rows, h, w, c;
  int kh, kw;
  const int32_t* xmap;
  const int32_t* ymap;
  float fill;
  // rows * h * w * c floats for the horizontal pass where the image does not
  // fit in shared memory (FilterScratchFloats > 0), else unused.
  float* mid;
};

// The floats of `mid` the launches of a batch need: 0 where each image is
// filtered whole in shared memory.
int64_t FilterScratchFloats(int64_t rows, int64_t h, int64_t w, int64_t c, int kh, int kw);

// Row r's taps are taps[r * taps_stride ..] (kw of them) horizontally and
// taps[r * taps_stride + y_taps_offset ..] (kh) vertically; taps_stride is 0
// when every row has the same.
cudaError_t LaunchGaussianBlur(const FilterBatch& batch, const float* taps, int64_t taps_stride, int y_taps_offset,
                               cudaStream_t stream);

// Row r's Gaussian taps for sigmas[r], as GaussianTaps (image_filter_params.h)
// computes them: kw at taps[r * taps_stride], then, unless kh == kw, kh at
// taps[r * taps_stride + kw]. On the device, so a batch's draws cross the
// bus as one float a sample.
cudaError_t LaunchGaussianTaps(const float* sigmas, int64_t rows, int kw, int kh, float* taps, int64_t taps_stride,
                               cudaStream_t stream);

// The max of each kh x kw window.
cudaError_t LaunchGreyDilation(const FilterBatch& batch, cudaStream_t stream);

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_IMAGE_FILTER_KERNELS_H_
