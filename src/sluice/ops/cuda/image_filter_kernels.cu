#include <cstddef>

#include "sluice/ops/cuda/image_filter_kernels.h"

namespace sluice::ops::cuda {
namespace {

// Threads of the two-pass kernels' blocks.
constexpr int kThreads = 256;
// Of the shared-memory kernel's blocks: small images get fewer (a warp per
// 32 values); 1024 measured slower on W1 (fewer blocks share an SM).
constexpr int kMaxSharedThreads = 256;
// Without opting in to more: enough for W1 (28x28x1) and W2 (32x32x3) images,
// 4 or more blocks per SM.
constexpr size_t kMaxSharedBytes = 48 * 1024;

// One output of a pass, as the cpu's row kernels reduce: w[0] * v0, then one
// fused multiply-add per tap in tap order (the cpu's Highway MulAdd), so
// results match to the bit; or the max, taken as x86's maxps does.
template <bool kBlur, typename Operand>
__device__ __forceinline__ float Reduce(const float* w, int k, Operand operand) {
  float acc = operand(0);
  if constexpr (kBlur) acc = __fmul_rn(w[0], acc);
  for (int j = 1; j < k; ++j) {
    const float v = operand(j);
    if constexpr (kBlur) {
      acc = __fmaf_rn(w[j], v, acc);
    } else {
      acc = acc > v ? acc : v;
    }
  }
  return acc;
}

// The horizontal pass at pixel x of a row; `row` points at the row's channel,
// `c` values apart.
template <bool kBlur, typename T>
__device__ __forceinline__ float HorizontalAt(const T* row, int x, int c, const int32_t* xmap, const float* w, int k,
                                              float fill) {
  return Reduce<kBlur>(w, k, [&](int j) {
    const int32_t from = xmap[x + j];
    return from < 0 ? fill : static_cast<float>(row[from * c]);
  });
}

// The vertical pass at row y; `column` points at the value's column of a
// plane of rows n values long.
template <bool kBlur>
__device__ __forceinline__ float VerticalAt(const float* column, int y, int n, const int32_t* ymap, const float* w,
                                            int k, float fill) {
  return Reduce<kBlur>(w, k, [&](int j) {
    const int32_t from = ymap[y + j];
    return from < 0 ? fill : column[from * n];
  });
}

__device__ __forceinline__ void StoreAs(float v, float* p) { *p = v; }
// Rounded to nearest (ties to even) and saturated, as the cpu's StoreAs (kernels/value_loops.h).
__device__ __forceinline__ void StoreAs(float v, uint8_t* p) {
  *p = static_cast<uint8_t>(min(max(__float2int_rn(v), 0), 255));
}

// The taps of image r, or none for a max.
struct Taps {
  const float* all;
  int64_t stride;
  int y_offset;
};

// i / d for the small non-negative i of a block's shared memory (< 2^22),
// cheaper than an integer division by a runtime divisor: the float quotient
// is off by at most one, which the remainder corrects.
struct SmallDivisor {
  int d;
  float inverse;
  __device__ explicit SmallDivisor(int divisor) : d(divisor), inverse(1.f / divisor) {}
  __device__ __forceinline__ int operator()(int i) const {
    const int q = __float2int_rz(__int2float_rn(i) * inverse);
    const int r = i - q * d;
    return q + (r >= d) - (r < 0);
  }
};

// One block per image at a time, both passes in shared memory, so each input
// value is read from global memory once and no map is looked up per tap:
// the image as float with its horizontal borders resolved (as the cpu pads
// its rows), then the horizontal pass followed by one row of the fill value,
// which the vertical pass reaches through precomputed row offsets.
template <typename T, bool kBlur>
__global__ void __launch_bounds__(kMaxSharedThreads) FilterInShared(FilterBatch b, Taps taps) {
  extern __shared__ float shared[];
  const int c = static_cast<int>(b.c), n = static_cast<int>(b.w) * c, h = static_cast<int>(b.h), elems = h * n;
  const int padded_row = (static_cast<int>(b.w) + b.kw - 1) * c, ymap_len = h + b.kh - 1;
  float* padded = shared;
  float* mid = padded + h * padded_row;
  float* wx = mid + elems + n;
  float* wy = wx + b.kw;
  int32_t* row_offset = reinterpret_cast<int32_t*>(wy + b.kh);
  int32_t* xmap = row_offset + ymap_len;
  for (int i = threadIdx.x; i < padded_row / c; i += blockDim.x) xmap[i] = b.xmap[i];
  for (int i = threadIdx.x; i < ymap_len; i += blockDim.x) row_offset[i] = b.ymap[i] < 0 ? elems : b.ymap[i] * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) mid[elems + i] = b.fill;
  __syncthreads();

  const SmallDivisor by_padded_row(padded_row), by_channels(c), by_row(n);
  const T* in = reinterpret_cast<const T*>(b.in);
  T* out = reinterpret_cast<T*>(b.out);
  for (int64_t r = blockIdx.x; r < b.rows; r += gridDim.x) {
    const T* src = in + r * elems;
#pragma unroll 4
    for (int i = threadIdx.x; i < h * padded_row; i += blockDim.x) {
      const int y = by_padded_row(i), q = i - y * padded_row, x = by_channels(q);
      const int32_t from = xmap[x];
      padded[i] = from < 0 ? b.fill : static_cast<float>(src[y * n + from * c + (q - x * c)]);
    }
    if constexpr (kBlur) {
      const float* row_taps = taps.all + r * taps.stride;
      for (int i = threadIdx.x; i < b.kw; i += blockDim.x) wx[i] = row_taps[i];
      for (int i = threadIdx.x; i < b.kh; i += blockDim.x) wy[i] = row_taps[taps.y_offset + i];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < elems; i += blockDim.x) {
      const int y = by_row(i);
      const float* window = padded + y * padded_row + (i - y * n);
      mid[i] = Reduce<kBlur>(wx, b.kw, [&](int j) { return window[j * c]; });
    }
    __syncthreads();
    T* dst = out + r * elems;
    for (int i = threadIdx.x; i < elems; i += blockDim.x) {
      const int y = by_row(i);
      const float* column = mid + (i - y * n);
      StoreAs(Reduce<kBlur>(wy, b.kh, [&](int j) { return column[row_offset[y + j]]; }), dst + i);
    }
    __syncthreads();  // before the next image overwrites `padded`, `mid` and the taps
  }
}

// Where an image does not fit in shared memory: each pass over the whole
// batch, through `mid` in global memory.
template <typename T, bool kBlur>
__global__ void HorizontalPass(FilterBatch b, Taps taps) {
  const int64_t n = b.w * b.c, elems = b.h * n, total = b.rows * elems;
  const T* in = reinterpret_cast<const T*>(b.in);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / elems, row_start = i - (i - r * elems) % n;
    const int e = static_cast<int>(i - row_start), x = e / static_cast<int>(b.c);
    const float* wx = kBlur ? taps.all + r * taps.stride : nullptr;
    b.mid[i] = HorizontalAt<kBlur>(in + row_start + (e - x * b.c), x, static_cast<int>(b.c), b.xmap, wx, b.kw, b.fill);
  }
}

template <typename T, bool kBlur>
__global__ void VerticalPass(FilterBatch b, Taps taps) {
  const int64_t n = b.w * b.c, elems = b.h * n, total = b.rows * elems;
  T* out = reinterpret_cast<T*>(b.out);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / elems, k = i - r * elems, y = k / n;
    const float* wy = kBlur ? taps.all + r * taps.stride + taps.y_offset : nullptr;
    StoreAs(VerticalAt<kBlur>(b.mid + r * elems + (k - y * n), static_cast<int>(y), static_cast<int>(n), b.ymap, wy,
                              b.kh, b.fill),
            out + i);
  }
}

size_t SharedBytes(int64_t h, int64_t w, int64_t c, int kh, int kw) {
  const int64_t padded = h * (w + kw - 1) * c, mid = (h + 1) * w * c;
  const int64_t floats = padded + mid + kh + kw, ints = (w + kw - 1) + (h + kh - 1);
  return static_cast<size_t>(floats * sizeof(float) + ints * sizeof(int32_t));
}

bool FitsInShared(int64_t h, int64_t w, int64_t c, int kh, int kw) {
  return SharedBytes(h, w, c, kh, kw) <= kMaxSharedBytes;
}

template <typename T, bool kBlur>
cudaError_t LaunchAs(const FilterBatch& b, Taps taps, cudaStream_t stream) {
  const int64_t elems = b.h * b.w * b.c;
  if (FitsInShared(b.h, b.w, b.c, b.kh, b.kw)) {
    const int64_t padded = b.h * (b.w + b.kw - 1) * b.c;
    const int threads = static_cast<int>(padded < kMaxSharedThreads ? (padded + 31) / 32 * 32 : kMaxSharedThreads);
    const int blocks = static_cast<int>(b.rows < (1 << 20) ? b.rows : (1 << 20));
    FilterInShared<T, kBlur><<<blocks, threads, SharedBytes(b.h, b.w, b.c, b.kh, b.kw), stream>>>(b, taps);
  } else {
    const int64_t total = b.rows * elems;
    const int64_t blocks = (total + kThreads - 1) / kThreads;
    const int grid = static_cast<int>(blocks < 65535 * 16 ? blocks : 65535 * 16);
    HorizontalPass<T, kBlur><<<grid, kThreads, 0, stream>>>(b, taps);
    VerticalPass<T, kBlur><<<grid, kThreads, 0, stream>>>(b, taps);
  }
  return cudaGetLastError();
}

template <bool kBlur>
cudaError_t Launch(const FilterBatch& b, Taps taps, cudaStream_t stream) {
  if (b.rows == 0) return cudaSuccess;
  return b.is_float ? LaunchAs<float, kBlur>(b, taps, stream) : LaunchAs<uint8_t, kBlur>(b, taps, stream);
}

// GaussianTaps' arithmetic: double exponentials, normalized by their sum.
__device__ void GaussianTapsOf(int k, float sigma, float* taps) {
  const double half = (k - 1) / 2.0;
  double sum = 0;
  for (int i = 0; i < k; ++i) {
    const double x = (i - half) / sigma;
    taps[i] = static_cast<float>(exp(-0.5 * x * x));
    sum += taps[i];
  }
  for (int i = 0; i < k; ++i) taps[i] = static_cast<float>(taps[i] / sum);
}

__global__ void GaussianTapsKernel(const float* __restrict__ sigmas, int64_t rows, int kw, int kh,
                                   float* __restrict__ taps, int64_t taps_stride) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    GaussianTapsOf(kw, sigmas[r], taps + r * taps_stride);
    if (kh != kw) GaussianTapsOf(kh, sigmas[r], taps + r * taps_stride + kw);
  }
}

}  // namespace

int64_t FilterScratchFloats(int64_t rows, int64_t h, int64_t w, int64_t c, int kh, int kw) {
  return FitsInShared(h, w, c, kh, kw) ? 0 : rows * h * w * c;
}

cudaError_t LaunchGaussianBlur(const FilterBatch& batch, const float* taps, int64_t taps_stride, int y_taps_offset,
                               cudaStream_t stream) {
  return Launch<true>(batch, Taps{taps, taps_stride, y_taps_offset}, stream);
}

cudaError_t LaunchGreyDilation(const FilterBatch& batch, cudaStream_t stream) {
  return Launch<false>(batch, Taps{}, stream);
}

cudaError_t LaunchGaussianTaps(const float* sigmas, int64_t rows, int kw, int kh, float* taps, int64_t taps_stride,
                               cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int64_t blocks = (rows + 127) / 128;
  GaussianTapsKernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 128, 0, stream>>>(sigmas, rows, kw, kh,
                                                                                                 taps, taps_stride);
  return cudaGetLastError();
}

}  // namespace sluice::ops::cuda
