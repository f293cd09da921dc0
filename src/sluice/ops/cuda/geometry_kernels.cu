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
__device__ __forceinline__ uint8_t StoreAs<uint8_t>(float v) {  // ops::StoreAs: saturate, round ties to even
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
// (ops' BorderIndex; reflect by its period 2n instead of ReflectIndex's
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
      out[ch] = StoreAs<T>(Bilinear(tap(yi0, xi0, ch), tap(yi0, xi1, ch), tap(yi1, xi0, ch), tap(yi1, xi1, ch), ax,
                                    ay));
    }
  }
}

// Values per thread of a flip: written at once when the image allows.
constexpr int kFlipVec = 4;

template <typename T>
struct alignas(sizeof(T) * kFlipVec) FlipGroup {
  T v[kFlipVec];
};

// One thread per kFlipVec consecutive output values: coalesced (vector)
// stores; the mirrored loads of a warp stay within the same cache lines.
template <typename T>
__global__ void FlipKernel(const T* __restrict__ src, T* __restrict__ dst, const float* __restrict__ maps,
                           int64_t rows, int h, int w, int c, bool whole_groups) {
  const int image = h * w * c;
  const int e0 = (blockIdx.x * blockDim.x + threadIdx.x) * kFlipVec;
  if (e0 >= image) return;
  const int row_values = w * c;
  const int y0 = e0 / row_values, x0 = (e0 - y0 * row_values) / c, ch0 = e0 - y0 * row_values - x0 * c;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* m = maps + 6 * r;
    const bool mirror_x = m[0] < 0, mirror_y = m[4] < 0;
    const T* in = src + r * image;
    FlipGroup<T> g;
    int y = y0, x = x0, ch = ch0;
    for (int k = 0; k < kFlipVec && e0 + k < image; ++k) {
      const int sx = mirror_x ? w - 1 - x : x, sy = mirror_y ? h - 1 - y : y;
      g.v[k] = in[(sy * w + sx) * c + ch];
      if (++ch == c) {
        ch = 0;
        if (++x == w) x = 0, ++y;
      }
    }
    T* out = dst + r * image + e0;
    if (whole_groups) {
      *reinterpret_cast<FlipGroup<T>*>(out) = g;
    } else {
      for (int k = 0; k < kFlipVec && e0 + k < image; ++k) out[k] = g.v[k];
    }
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
__global__ void HwcToChwKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t rows, int plane,
                               int channels) {
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
cudaError_t WarpTyped(const DeviceImages& im, const float* maps, DeviceFill fill, float fill_value,
                      const uint8_t* src, uint8_t* dst, cudaStream_t stream) {
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
      WarpAffineKernel<T, 0>
          <<<grid, kThreads, 0, stream>>>(in, out, maps, im.rows, im.h, im.w, im.c, fill, fill_value);
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
  const int64_t image = int64_t{im.h} * im.w * im.c;
  const dim3 grid = Grid((image + kFlipVec - 1) / kFlipVec, im.rows);
  // Every group whole and aligned: images of a multiple of kFlipVec values
  // from an aligned base (the pool's buffers are).
  const bool whole = image % kFlipVec == 0 &&
                     reinterpret_cast<uintptr_t>(dst) % (kFlipVec * (im.is_float ? sizeof(float) : 1)) == 0;
  if (im.is_float) {
    FlipKernel<<<grid, kThreads, 0, stream>>>(reinterpret_cast<const float*>(src), reinterpret_cast<float*>(dst), maps,
                                              im.rows, im.h, im.w, im.c, whole);
  } else {
    FlipKernel<<<grid, kThreads, 0, stream>>>(src, dst, maps, im.rows, im.h, im.w, im.c, whole);
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
