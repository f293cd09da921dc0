#include "sluice/ops/cuda/color_kernels.h"

namespace sluice::ops::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops: a bounded grid covers any n.
int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

template <typename T>
__global__ void Rescale(const T* in, int64_t n, float scale, float offset, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<float>(in[i]) * scale + offset;
  }
}

template <typename T>
__global__ void Normalize(const T* in, int64_t n, int64_t elems, int64_t channels, int64_t plane,
                          bool channels_first, const float* a, const float* b, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = channels_first ? (i % elems) / plane : i % channels;
    // a * v + b as one fused multiply-add, as the cpu kernel's compiler may not:
    // values agree within a float rounding.
    out[i] = fmaf(static_cast<float>(in[i]), a[c], b[c]);
  }
}

}  // namespace

cudaError_t LaunchRescale(const uint8_t* in, bool in_is_float, int64_t n, float scale, float offset, float* out,
                          cudaStream_t stream) {
  if (in_is_float) {
    Rescale<<<Blocks(n), kThreads, 0, stream>>>(reinterpret_cast<const float*>(in), n, scale, offset, out);
  } else {
    Rescale<<<Blocks(n), kThreads, 0, stream>>>(in, n, scale, offset, out);
  }
  return cudaGetLastError();
}

cudaError_t LaunchNormalize(const uint8_t* in, bool in_is_float, int64_t n, int64_t elems, int64_t channels,
                            int64_t plane, bool channels_first, const float* a, const float* b, float* out,
                            cudaStream_t stream) {
  if (in_is_float) {
    Normalize<<<Blocks(n), kThreads, 0, stream>>>(reinterpret_cast<const float*>(in), n, elems, channels, plane,
                                                  channels_first, a, b, out);
  } else {
    Normalize<<<Blocks(n), kThreads, 0, stream>>>(in, n, elems, channels, plane, channels_first, a, b, out);
  }
  return cudaGetLastError();
}

}  // namespace sluice::ops::cuda
