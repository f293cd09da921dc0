// Launchers of the cuda kernels of the element-wise value ops (cast,
// rescale, normalize; color_params.h):
// plain C++ declarations, so that the kernel classes compile with the host
// compiler and only the launchers with nvcc.
#ifndef SLUICE_OPS_CUDA_COLOR_KERNELS_H_
#define SLUICE_OPS_CUDA_COLOR_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "sluice/ops/cuda/elem_type.h"

namespace sluice::ops::cuda {

// out[i] = in[i] * scale + offset for n values, in uint8 or float32.
cudaError_t LaunchRescale(const uint8_t* in, bool in_is_float, int64_t n, float scale, float offset, float* out,
                          cudaStream_t stream);

// out[i] = in[i] * a[c] + b[c] for n values of samples of `elems` values,
// c = (i % elems) / plane when channels first, else i % channels; a and b
// are device arrays of `channels` values.
cudaError_t LaunchNormalize(const uint8_t* in, bool in_is_float, int64_t n, int64_t elems, int64_t channels,
                            int64_t plane, bool channels_first, const float* a, const float* b, float* out,
                            cudaStream_t stream);

// out[i] = in[i] converted for n values: float to integer rounds toward zero
// and saturates (NaN becomes 0), integer narrowing saturates, the rest as
// static_cast. `from` and `to` are uint8, int32, int64 or float32.
cudaError_t LaunchCast(const uint8_t* in, ElemType from, int64_t n, ElemType to, uint8_t* out, cudaStream_t stream);

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_COLOR_KERNELS_H_
