#include "sluice/ops/cuda/geometry_kernels.h"

namespace sluice::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;

// Blocks along x cover one sample's `per_row` work items; blocks along y
// take rows, looping when there are more rows than the grid allows.
dim3 Grid(int64_t per_row, int64_t rows) {
  return dim3(static_cast<unsigned>((per_row + kThreads - 1) / kThreads),
              static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY));
}

// Offsets inside one sample are int: a sample of 2^31 values or more is
// refused rather than overflowed.
bool FitsInt(int64_t values) { return values < (int64_t{1} << 31) - kThreads; }

template <typename T>
__device__ __forceinline__ T StoreAs(float v);
template <>
__device__ __forceinline__ float StoreAs<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ uint8_t StoreAs<uint8_t>(float v) {  // kernels::StoreAs: saturate, round ties to even
  v = v < 0.f ? 0.f : (v > 255.f ? 255.f : v);
  return static_cast<uint8_t>(rintf(v));
}

// The cpu's bilinear blend: each step one fused multiply-add, in its order.
__device__ __forceinline__ float Bilinear(float v00, float v01, float v10, float v11, float ax, float ay) {
  const float top = fmaf(ax, v01 - v00, v00);
  const float bottom = fmaf(ax, v11 - v10, v10);
  return fmaf(ay, bottom - top, top);
}

// The pixel index for coordinate i on an axis of n, or -1 for the fill
// (border.h's BorderIndex with Keras' modes; reflect by its period 2n instead of its
// loop, which gives the same index).
__device__ __forceinline__ int BorderIndex(int i, int n, DeviceFill fill) {
  if (i >= 0 && i < n) return i;
  if (fill == DeviceFill::kConstant) return -1;
  if (fill == DeviceFill::kNearest) return i < 0 ? 0 : n - 1;
  if (n == 1) return 0;
  const int period = 2 * n;
  int r = i % period;
  if (r < 0) r += period;
  return r < n ? r : period - 1 - r;
}

// One thread per output pixel, all its channels; kC = 0: `channels` at run time.
template <typename T, int kC>
__global__ void WarpAffineKernel(const T* __restrict__ src, T* __restrict__ dst, const float* __restrict__ maps,
                                 int64_t rows, int h, int w, int channels, DeviceFill fill, float fill_value) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= h * w) return;
  const int y = p / w, x = p - y * w;
  const int c = kC > 0 ? kC : channels;
  const int stride = w * c;
  const int64_t image = int64_t{h} * stride;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* m = maps + 6 * r;
    const float bx = fmaf(m[1], static_cast<float>(y), m[2]), by = fmaf(m[4], static_cast<float>(y), m[5]);
    // Far-away coordinates are clamped before the int conversion, as the cpu's.
    const float fx = fminf(fmaxf(fmaf(m[0], static_cast<float>(x), bx), -1e6f), 1e6f);
    const float fy = fminf(fmaxf(fmaf(m[3], static_cast<float>(x), by), -1e6f), 1e6f);
    const float flx = floorf(fx), fly = floorf(fy);
    const float ax = fx - flx, ay = fy - fly;
    const int x0 = static_cast<int>(flx), y0 = static_cast<int>(fly);
    const T* in = src + r * image;
    T* out = dst + r * image + int64_t{p} * c;
    if (x0 >= 0 && y0 >= 0 && x0 + 1 < w && y0 + 1 < h) {  // interior: no border logic
      const T* q = in + y0 * stride + x0 * c;
#pragma unroll
      for (int ch = 0; ch < c; ++ch) {
        out[ch] = StoreAs<T>(Bilinear(q[ch], q[ch + c], q[ch + stride], q[ch + stride + c], ax, ay));
      }
      continue;
    }
    const int xi0 = BorderIndex(x0, w, fill), xi1 = BorderIndex(x0 + 1, w, fill);
    const int yi0 = BorderIndex(y0, h, fill), yi1 = BorderIndex(y0 + 1, h, fill);
    auto tap = [&](int yi, int xi, int ch) -> float {
      return yi < 0 || xi < 0 ? fill_value : static_cast<float>(in[yi * stride + xi * c + ch]);
    };
#pragma unroll
    for (int ch = 0; ch < c; ++ch) {
      out[ch] =
          StoreAs<T>(Bilinear(tap(yi0, xi0, ch), tap(yi0, xi1, ch), tap(yi1, xi0, ch), tap(yi1, xi1, ch), ax, ay));
    }
  }
}

// The widest image row a warp stages in shared memory (8 warps a block);
// wider rows take FlipPixelsKernel.
constexpr int kMaxStagedRowBytes = 6 << 10;

// One warp per image row at a time: the source row (mirrored vertically as
// the map says) is read into the warp's shared memory as 4-byte words, then
// written out as words, each byte taken from its mirrored pixel. Global
// memory sees only coalesced word accesses, and the warp's lanes walk the
// row by increments (no division per word). REQUIRES: row_bytes % 4 == 0,
// 4-byte aligned images.
__global__ void FlipRowsKernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst,
                               const float* __restrict__ maps, int64_t rows, int h, int w, int pixel_bytes) {
  extern __shared__ uint32_t staged[];
  const int row_bytes = w * pixel_bytes, row_words = row_bytes / 4;
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t* mine = staged + warp * row_words;
  const uint8_t* mine_bytes = reinterpret_cast<const uint8_t*>(mine);
  // A lane's first byte 4 * lane is at pixel lane_x, byte lane_offset; each
  // step of 32 words moves 128 bytes on.
  const int lane_x = 4 * lane / pixel_bytes, lane_offset = 4 * lane - lane_x * pixel_bytes;
  const int step_x = 128 / pixel_bytes, step_offset = 128 - step_x * pixel_bytes;
  for (int64_t g = int64_t{blockIdx.x} * warps + warp; g < rows * h; g += int64_t{gridDim.x} * warps) {
    const int64_t r = g / h;
    const int y = static_cast<int>(g - r * h);
    const float* m = maps + 6 * r;
    const bool mirror_x = m[0] < 0;
    const int sy = m[4] < 0 ? h - 1 - y : y;
    const uint32_t* in = reinterpret_cast<const uint32_t*>(src + (r * h + sy) * row_bytes);
    uint32_t* out = reinterpret_cast<uint32_t*>(dst + g * row_bytes);
    if (!mirror_x) {
      for (int t = lane; t < row_words; t += 32) out[t] = in[t];
      continue;
    }
    for (int t = lane; t < row_words; t += 32) mine[t] = in[t];
    __syncwarp();
    int x = lane_x, offset = lane_offset;
    for (int t = lane; t < row_words; t += 32) {
      uint32_t word = 0;
      for (int b = 0, bx = x, bo = offset; b < 4; ++b) {
        word |= uint32_t{mine_bytes[(w - 1 - bx) * pixel_bytes + bo]} << (8 * b);
        if (++bo == pixel_bytes) bo = 0, ++bx;
      }
      out[t] = word;
      x += step_x;
      offset += step_offset;
      if (offset >= pixel_bytes) offset -= pixel_bytes, ++x;
    }
    __syncwarp();
  }
}

// Any row: one thread per output pixel, a copy of the mirrored pixel.
template <typename T>
__global__ void FlipPixelsKernel(const T* __restrict__ src, T* __restrict__ dst, const float* __restrict__ maps,
                                 int64_t rows, int h, int w, int c) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= h * w) return;
  const int y = p / w, x = p - y * w;
  const int64_t image = int64_t{h} * w * c;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* m = maps + 6 * r;
    const int sx = m[0] < 0 ? w - 1 - x : x, sy = m[4] < 0 ? h - 1 - y : y;
    const T* in = src + r * image + (sy * w + sx) * c;
    T* out = dst + r * image + int64_t{p} * c;
    for (int ch = 0; ch < c; ++ch) out[ch] = in[ch];
  }
}

// kVec consecutive values of one output plane, stored at once.
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Group {
  T v[kVec];
};

// One thread per kVec outputs of one channel plane: coalesced vector
// stores; the strided loads of a warp share cache lines.
template <typename T, int kVec>
__global__ void HwcToChwKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t rows, int plane, int channels) {
  const int o = (blockIdx.x * blockDim.x + threadIdx.x) * kVec;
  const int sample = plane * channels;
  if (o >= sample) return;
  const int ch = o / plane, p = o - ch * plane;  // plane % kVec == 0: the group is in one plane
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const T* in = src + r * sample + int64_t{p} * channels + ch;
    Group<T, kVec> g;
#pragma unroll
    for (int k = 0; k < kVec; ++k) g.v[k] = in[k * channels];
    *reinterpret_cast<Group<T, kVec>*>(dst + r * sample + o) = g;
  }
}

template <typename T>
cudaError_t WarpTyped(const DeviceImages& im, const float* maps, DeviceFill fill, float fill_value, const uint8_t* src,
                      uint8_t* dst, cudaStream_t stream) {
  const T* in = reinterpret_cast<const T*>(src);
  T* out = reinterpret_cast<T*>(dst);
  const dim3 grid = Grid(int64_t{im.h} * im.w, im.rows);
  // Fixed channel counts let the compiler unroll the channel loop.
  switch (im.c) {
    case 1:
      WarpAffineKernel<T, 1><<<grid, kThreads, 0, stream>>>(in, out, maps, im.rows, im.h, im.w, 1, fill, fill_value);
      break;
    case 3:
      WarpAffineKernel<T, 3><<<grid, kThreads, 0, stream>>>(in, out, maps, im.rows, im.h, im.w, 3, fill, fill_value);
      break;
    default:
      WarpAffineKernel<T, 0><<<grid, kThreads, 0, stream>>>(in, out, maps, im.rows, im.h, im.w, im.c, fill, fill_value);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t HwcToChwTyped(const uint8_t* src, int64_t rows, int64_t plane, int64_t channels, uint8_t* dst,
                          cudaStream_t stream) {
  constexpr int kVec = sizeof(T) == 8 ? 2 : 4;  // at most 16 bytes a store
  const T* in = reinterpret_cast<const T*>(src);
  T* out = reinterpret_cast<T*>(dst);
  const bool aligned = reinterpret_cast<uintptr_t>(dst) % (sizeof(T) * kVec) == 0;
  if (plane % kVec == 0 && aligned) {
    HwcToChwKernel<T, kVec><<<Grid(plane * channels / kVec, rows), kThreads, 0, stream>>>(
        in, out, rows, static_cast<int>(plane), static_cast<int>(channels));
  } else {
    HwcToChwKernel<T, 1><<<Grid(plane * channels, rows), kThreads, 0, stream>>>(in, out, rows, static_cast<int>(plane),
                                                                                static_cast<int>(channels));
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchWarpAffine(const DeviceImages& images, const float* maps, DeviceFill fill, float fill_value,
                             const uint8_t* src, uint8_t* dst, cudaStream_t stream) {
  if (images.rows == 0) return cudaSuccess;
  if (!FitsInt(int64_t{images.h} * images.w * images.c)) return cudaErrorInvalidValue;
  return images.is_float ? WarpTyped<float>(images, maps, fill, fill_value, src, dst, stream)
                         : WarpTyped<uint8_t>(images, maps, fill, fill_value, src, dst, stream);
}

cudaError_t LaunchFlip(const DeviceImages& im, const float* maps, const uint8_t* src, uint8_t* dst,
                       cudaStream_t stream) {
  if (im.rows == 0) return cudaSuccess;
  if (!FitsInt(int64_t{im.h} * im.w * im.c)) return cudaErrorInvalidValue;
  const int pixel_bytes = im.c * (im.is_float ? 4 : 1);
  const int64_t row_bytes = int64_t{im.w} * pixel_bytes;
  const bool words =
      row_bytes % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 4 == 0 && reinterpret_cast<uintptr_t>(dst) % 4 == 0;
  if (words && row_bytes <= kMaxStagedRowBytes) {
    const int warps = kThreads / 32;
    const int64_t blocks = (im.rows * im.h + warps - 1) / warps;
    FlipRowsKernel<<<static_cast<unsigned>(blocks < (1 << 20) ? blocks : 1 << 20), kThreads,
                     static_cast<size_t>(row_bytes) * warps, stream>>>(src, dst, maps, im.rows, im.h, im.w,
                                                                       pixel_bytes);
  } else if (im.is_float) {
    FlipPixelsKernel<<<Grid(int64_t{im.h} * im.w, im.rows), kThreads, 0, stream>>>(
        reinterpret_cast<const float*>(src), reinterpret_cast<float*>(dst), maps, im.rows, im.h, im.w, im.c);
  } else {
    FlipPixelsKernel<<<Grid(int64_t{im.h} * im.w, im.rows), kThreads, 0, stream>>>(src, dst, maps, im.rows, im.h, im.w,
                                                                                   im.c);
  }
  return cudaGetLastError();
}

cudaError_t LaunchHwcToChw(const uint8_t* src, int64_t rows, int64_t plane, int64_t channels, int elem_bytes,
                           uint8_t* dst, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (!FitsInt(plane * channels)) return cudaErrorInvalidValue;
  switch (elem_bytes) {
    case 1:
      return HwcToChwTyped<uint8_t>(src, rows, plane, channels, dst, stream);
    case 4:
      return HwcToChwTyped<uint32_t>(src, rows, plane, channels, dst, stream);
    case 8:
      return HwcToChwTyped<uint64_t>(src, rows, plane, channels, dst, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace sluice::ops::cuda
