#include <cuda_fp16.h>

#include "sluice/ops/cuda/normalize_kernels.h"
#include "sluice/ops/cuda/pack.cuh"

namespace sluice::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;

template <int kBytes>
__device__ bool Aligned(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & (kBytes - 1)) == 0;
}

// The n <= N values at v into dst, in the widest accesses the count and
// dst's alignment allow (16, 8 or 4 bytes, else one value at a time).
template <int kBytes, typename T, int N>
__device__ bool StoreWords(T* dst, const Pack<T, N>& v, int n) {
  if constexpr ((N * sizeof(T)) % kBytes != 0 || kBytes > alignof(Pack<T, N>)) {
    return false;
  } else {
    if (n != N || !Aligned<kBytes>(dst)) return false;
    using Word = Pack<uint8_t, kBytes>;
#pragma unroll
    for (int k = 0; k < static_cast<int>(N * sizeof(T)) / kBytes; ++k) {
      reinterpret_cast<Word*>(dst)[k] = reinterpret_cast<const Word*>(v.v)[k];
    }
    return true;
  }
}

template <typename T, int N>
__device__ void Store(T* dst, const Pack<T, N>& v, int n) {
  if (StoreWords<16>(dst, v, n) || StoreWords<8>(dst, v, n) || StoreWords<4>(dst, v, n)) return;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (i < n) dst[i] = v.v[i];
  }
}

// a * level + b as the cpu kernel computes it (one fused multiply-add), in
// the output type; uint8 output keeps the level (the cpu's a = 1, b = 0).
template <typename T>
__device__ T Normalized(uint8_t level, float a, float b) {
  if constexpr (sizeof(T) == 1) {
    return level;
  } else if constexpr (sizeof(T) == 2) {
    return __float2half_rn(fmaf(a, static_cast<float>(level), b));
  } else {
    return fmaf(a, static_cast<float>(level), b);
  }
}

// Four output pixels of one row a thread: their source is one run of 4 * C
// bytes (reversed for a mirrored sample), read as C words where aligned.
// kC is the channel count, or 0 for any (one byte at a time).
template <typename T, int kC>
__global__ void __launch_bounds__(kThreads)
    CropMirrorNormalize(const uint8_t* __restrict__ in, int64_t rows, CropLayout l, const float* __restrict__ a,
                        const float* __restrict__ b, const uint8_t* __restrict__ mirror, bool mirror_all,
                        T* __restrict__ out) {
  const int quads_per_row = static_cast<int>((l.w + 3) / 4);
  const int quad = blockIdx.x * kThreads + threadIdx.x;
  if (quad >= l.h * quads_per_row) return;
  const int y = quad / quads_per_row;
  const int x0 = (quad - y * quads_per_row) * 4;
  const int n = min(4, static_cast<int>(l.w) - x0);
  const int64_t channels = kC > 0 ? kC : l.channels;
  const int64_t out_row_elems = l.out_row_bytes / static_cast<int64_t>(sizeof(T));
  const bool normalizes = sizeof(T) > 1;
  float ra[kC > 0 ? kC : 1], rb[kC > 0 ? kC : 1];
  if constexpr (kC > 0) {
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      ra[c] = normalizes ? a[c] : 1.f;
      rb[c] = normalizes ? b[c] : 0.f;
    }
  }
  for (int64_t s = blockIdx.y; s < rows; s += gridDim.y) {
    const bool mirrored = mirror != nullptr ? mirror[s] != 0 : mirror_all;
    const int64_t first = mirrored ? l.w - x0 - n : x0;  // the run's first source pixel
    const uint8_t* src = in + s * l.in_row_bytes + ((l.top + y) * l.in_w + l.left + first) * channels;
    T* dst = out + s * out_row_elems;
    if constexpr (kC == 0) {
      for (int i = 0; i < n; ++i) {
        const uint8_t* p = src + (mirrored ? n - 1 - i : i) * channels;
        for (int64_t c = 0; c < channels; ++c) {
          const T v = Normalized<T>(p[c], normalizes ? a[c] : 1.f, normalizes ? b[c] : 0.f);
          dst[l.chw ? (c * l.h + y) * l.w + x0 + i : (y * l.w + x0 + i) * channels + c] = v;
        }
      }
    } else {
      // Pixel i of the output is pixel i of px, or 3 - i when mirrored: a
      // short run of a mirrored sample sits at px's end. Fixed indices keep
      // px in registers.
      Pack<uint8_t, 4 * kC> px;
      if (n == 4 && Aligned<4>(src)) {
        using Word = Pack<uint8_t, 4>;
#pragma unroll
        for (int k = 0; k < kC; ++k) reinterpret_cast<Word*>(px.v)[k] = reinterpret_cast<const Word*>(src)[k];
      } else {
        const int skip = mirrored ? (4 - n) * kC : 0;
#pragma unroll
        for (int k = 0; k < 4 * kC; ++k) px.v[k] = k >= skip && k < skip + n * kC ? src[k - skip] : 0;
      }
      auto level = [&](int i, int c) { return mirrored ? px.v[(3 - i) * kC + c] : px.v[i * kC + c]; };
      if (l.chw) {
#pragma unroll
        for (int c = 0; c < kC; ++c) {
          Pack<T, 4> v;
#pragma unroll
          for (int i = 0; i < 4; ++i) v.v[i] = Normalized<T>(level(i, c), ra[c], rb[c]);
          Store(dst + (c * l.h + y) * l.w + x0, v, n);
        }
      } else {
        Pack<T, 4 * kC> v;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int c = 0; c < kC; ++c) v.v[i * kC + c] = Normalized<T>(level(i, c), ra[c], rb[c]);
        }
        Store(dst + (y * l.w + x0) * kC, v, n * kC);
      }
    }
  }
}

template <typename T>
cudaError_t LaunchCropMirrorNormalizeAs(const uint8_t* in, int64_t rows, const CropLayout& l, const float* a,
                                        const float* b, const uint8_t* mirror, bool mirror_all, uint8_t* out,
                                        cudaStream_t stream) {
  const int64_t quads = l.h * ((l.w + 3) / 4);
  const dim3 grid(static_cast<unsigned>((quads + kThreads - 1) / kThreads),
                  static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY));
  T* typed = reinterpret_cast<T*>(out);
  switch (l.channels) {
    case 1:
      CropMirrorNormalize<T, 1><<<grid, kThreads, 0, stream>>>(in, rows, l, a, b, mirror, mirror_all, typed);
      break;
    case 3:
      CropMirrorNormalize<T, 3><<<grid, kThreads, 0, stream>>>(in, rows, l, a, b, mirror, mirror_all, typed);
      break;
    case 4:
      CropMirrorNormalize<T, 4><<<grid, kThreads, 0, stream>>>(in, rows, l, a, b, mirror, mirror_all, typed);
      break;
    default:
      CropMirrorNormalize<T, 0><<<grid, kThreads, 0, stream>>>(in, rows, l, a, b, mirror, mirror_all, typed);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchCropMirrorNormalize(const uint8_t* in, int64_t rows, const CropLayout& layout, const float* a,
                                      const float* b, const uint8_t* mirror, bool mirror_all, ElemType out_type,
                                      uint8_t* out, cudaStream_t stream) {
  if (rows == 0 || layout.h == 0 || layout.w == 0) return cudaSuccess;
  switch (out_type) {
    case ElemType::kFloat32:
      return LaunchCropMirrorNormalizeAs<float>(in, rows, layout, a, b, mirror, mirror_all, out, stream);
    case ElemType::kFloat16:
      return LaunchCropMirrorNormalizeAs<__half>(in, rows, layout, a, b, mirror, mirror_all, out, stream);
    case ElemType::kUInt8:
      return LaunchCropMirrorNormalizeAs<uint8_t>(in, rows, layout, a, b, mirror, mirror_all, out, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace sluice::ops::cuda
