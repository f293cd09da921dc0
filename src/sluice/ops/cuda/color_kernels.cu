#include <cstdint>
#include <type_traits>

#include "sluice/ops/cuda/color_kernels.h"
#include "sluice/ops/cuda/pack.cuh"

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

// Inclusive ranges of the integer types, as int64 (usable in device code,
// unlike std::numeric_limits without relaxed constexpr).
template <typename T>
struct IntRange;
template <>
struct IntRange<uint8_t> {
  static constexpr int64_t kLo = 0, kHi = 255;
};
template <>
struct IntRange<int32_t> {
  static constexpr int64_t kLo = INT32_MIN, kHi = INT32_MAX;
};
template <>
struct IntRange<int64_t> {
  static constexpr int64_t kLo = INT64_MIN, kHi = INT64_MAX;
};

// The cpu's Convert (color.cc), comparisons in the same types.
template <typename In, typename Out>
__device__ Out Convert(In x) {
  if constexpr (!std::is_same_v<Out, float> && !std::is_same_v<In, Out>) {
    using R = IntRange<Out>;
    if constexpr (std::is_same_v<In, float>) {
      if (!(x == x)) return 0;
      if (x <= static_cast<float>(R::kLo)) return static_cast<Out>(R::kLo);
      if (x >= static_cast<float>(R::kHi)) return static_cast<Out>(R::kHi);
      return static_cast<Out>(x);
    } else {
      const int64_t v = static_cast<int64_t>(x);
      return static_cast<Out>(v < R::kLo ? R::kLo : (v > R::kHi ? R::kHi : v));
    }
  } else {
    return static_cast<Out>(x);
  }
}

// kVec values a thread a step, each side read or written as one access
// (REQUIRES: in and out 16-byte aligned when kVec > 1); then the tail.
template <typename In, typename Out, int kVec>
__global__ void __launch_bounds__(kThreads) Cast(const In* __restrict__ in, int64_t n, Out* __restrict__ out) {
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t packs = n / kVec;
  for (int64_t i = first; i < packs; i += stride) {
    const Pack<In, kVec> p = reinterpret_cast<const Pack<In, kVec>*>(in)[i];
    Pack<Out, kVec> q;
#pragma unroll
    for (int k = 0; k < kVec; ++k) q.v[k] = Convert<In, Out>(p.v[k]);
    reinterpret_cast<Pack<Out, kVec>*>(out)[i] = q;
  }
  for (int64_t i = packs * kVec + first; i < n; i += stride) out[i] = Convert<In, Out>(in[i]);
}

template <typename In, typename Out>
cudaError_t LaunchCastAs(const uint8_t* in, int64_t n, uint8_t* out, cudaStream_t stream) {
  // 16 bytes of the wider type a thread: a warp's accesses of each side
  // are then contiguous (strided 16-byte stores of the narrow-to-wide
  // casts cost a third of the bandwidth).
  constexpr int kVec = 16 / (sizeof(In) > sizeof(Out) ? sizeof(In) : sizeof(Out));
  const bool aligned = (reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) % 16 == 0;
  const int vec = aligned ? kVec : 1;
  // Grid-stride: a bounded grid (a few waves of an H100) covers any n.
  const int64_t steps = (n / vec + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(steps < 8192 ? (steps > 0 ? steps : 1) : 8192);
  const In* src = reinterpret_cast<const In*>(in);
  Out* dst = reinterpret_cast<Out*>(out);
  if (aligned) {
    Cast<In, Out, kVec><<<blocks, kThreads, 0, stream>>>(src, n, dst);
  } else {
    Cast<In, Out, 1><<<blocks, kThreads, 0, stream>>>(src, n, dst);
  }
  return cudaGetLastError();
}

// Calls f(T{}) with T the C++ type of a cast's dtype.
template <typename F>
cudaError_t WithCastType(ElemType type, F f) {
  switch (type) {
    case ElemType::kUInt8:
      return f(uint8_t{});
    case ElemType::kInt32:
      return f(int32_t{});
    case ElemType::kInt64:
      return f(int64_t{});
    case ElemType::kFloat32:
      return f(float{});
    case ElemType::kFloat16:
      break;
  }
  return cudaErrorInvalidValue;
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

cudaError_t LaunchCast(const uint8_t* in, ElemType from, int64_t n, ElemType to, uint8_t* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return WithCastType(from, [&](auto in_type) {
    return WithCastType(to, [&](auto out_type) {
      using In = decltype(in_type);
      using Out = decltype(out_type);
      if constexpr (std::is_same_v<In, Out>) {
        return cudaMemcpyAsync(out, in, n * sizeof(In), cudaMemcpyDeviceToDevice, stream);
      } else {
        return LaunchCastAs<In, Out>(in, n, out, stream);
      }
    });
  });
}

}  // namespace sluice::ops::cuda
