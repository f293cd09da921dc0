#include "sluice/ops/cuda/color_kernels.h"

namespace sluice::ops::cuda {
namespace {

constexpr int kThreads = 256;
// Values per thread: one 4-byte load of uint8 (16 of float), one 16-byte
// store of float.
constexpr int kVec = 4;

// Grid-stride loops over groups of kVec values: a bounded grid covers any n.
int Blocks(int64_t n) {
  const int64_t blocks = (n + int64_t{kThreads} * kVec - 1) / (int64_t{kThreads} * kVec);
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

struct alignas(4) U8x4 {
  uint8_t v[4];
};

// The kVec values from i on (fewer at the end), read at once when whole
// and `aligned`.
template <typename T>
__device__ __forceinline__ void Load(const T* __restrict__ in, int64_t i, int64_t n, bool aligned, float* v) {
  if (aligned && i + kVec <= n) {
    if constexpr (sizeof(T) == 1) {
      const U8x4 q = *reinterpret_cast<const U8x4*>(in + i);
      for (int k = 0; k < kVec; ++k) v[k] = q.v[k];
    } else {
      const float4 q = *reinterpret_cast<const float4*>(in + i);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    }
    return;
  }
  for (int k = 0; k < kVec; ++k) v[k] = i + k < n ? static_cast<float>(in[i + k]) : 0.f;
}

__device__ __forceinline__ void Store(float* __restrict__ out, int64_t i, int64_t n, bool aligned, const float* v) {
  if (aligned && i + kVec <= n) {
    *reinterpret_cast<float4*>(out + i) = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
  for (int k = 0; k < kVec && i + k < n; ++k) out[i + k] = v[k];
}

template <typename T>
__global__ void Rescale(const T* __restrict__ in, int64_t n, bool aligned, float scale, float offset,
                        float* __restrict__ out) {
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * kVec; i < n;
       i += int64_t{gridDim.x} * blockDim.x * kVec) {
    float v[kVec];
    Load(in, i, n, aligned, v);
    for (int k = 0; k < kVec; ++k) v[k] = v[k] * scale + offset;
    Store(out, i, n, aligned, v);
  }
}

// The channel of value i is followed through the group by increments: one
// division per group, not per value.
template <typename T>
__global__ void Normalize(const T* __restrict__ in, int64_t n, bool aligned, int64_t elems, int channels, int64_t plane,
                          bool channels_first, const float* __restrict__ a, const float* __restrict__ b,
                          float* __restrict__ out) {
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * kVec; i < n;
       i += int64_t{gridDim.x} * blockDim.x * kVec) {
    float v[kVec];
    Load(in, i, n, aligned, v);
    const int64_t j = i % elems;  // within the sample
    int c;
    int64_t left;  // values of channel c from j on
    if (channels_first) {
      c = static_cast<int>(j / plane);
      left = plane - j % plane;
    } else {
      c = static_cast<int>(j % channels);
      left = 1;
    }
    for (int k = 0; k < kVec; ++k) {
      // a * v + b as one fused multiply-add, as the cpu kernel's compiler
      // may not: values agree within a float rounding.
      v[k] = fmaf(v[k], a[c], b[c]);
      if (--left == 0) {
        c = c + 1 == channels ? 0 : c + 1;
        left = channels_first ? plane : 1;
      }
    }
    Store(out, i, n, aligned, v);
  }
}

// Whether group loads and stores can be whole: the pool's buffers are
// aligned, a view into one may not be.
bool Aligned(const void* in, bool in_is_float, const void* out) {
  return reinterpret_cast<uintptr_t>(in) % (in_is_float ? 16 : 4) == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
}

}  // namespace

cudaError_t LaunchRescale(const uint8_t* in, bool in_is_float, int64_t n, float scale, float offset, float* out,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool aligned = Aligned(in, in_is_float, out);
  if (in_is_float) {
    Rescale<<<Blocks(n), kThreads, 0, stream>>>(reinterpret_cast<const float*>(in), n, aligned, scale, offset, out);
  } else {
    Rescale<<<Blocks(n), kThreads, 0, stream>>>(in, n, aligned, scale, offset, out);
  }
  return cudaGetLastError();
}

cudaError_t LaunchNormalize(const uint8_t* in, bool in_is_float, int64_t n, int64_t elems, int64_t channels,
                            int64_t plane, bool channels_first, const float* a, const float* b, float* out,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool aligned = Aligned(in, in_is_float, out);
  const int c = static_cast<int>(channels);
  if (in_is_float) {
    Normalize<<<Blocks(n), kThreads, 0, stream>>>(reinterpret_cast<const float*>(in), n, aligned, elems, c, plane,
                                                  channels_first, a, b, out);
  } else {
    Normalize<<<Blocks(n), kThreads, 0, stream>>>(in, n, aligned, elems, c, plane, channels_first, a, b, out);
  }
  return cudaGetLastError();
}

}  // namespace sluice::ops::cuda
