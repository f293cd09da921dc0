#include "sluice/ops/cuda/resample_kernels.h"

namespace sluice::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridZ = 65535;
// Intermediate elements per thread of the vertical pass, stored at once.
constexpr int kVertical = kResampleStrideAlign;
// resample.h's fixed point: values between the passes in Q7, weights in Q15.
constexpr int kValueShift = 7;

// The cpu's rounded product of a value and a Q15 weight, (a * w + 2^14) >>
// 15 (x86's pmulhrsw); it always fits int16.
__device__ __forceinline__ int MulRound(int a, int w) { return (a * w + (1 << 14)) >> 15; }

// The cpu sums the products in int16, wrapping; an int sum cut to int16 at
// the end is the same value (both are the sum modulo 2^16).
__device__ __forceinline__ int16_t WrapToInt16(int sum) { return static_cast<int16_t>(sum); }

// Over more than kResampleMostRoundedTaps taps the cpu sums exact products
// and rounds the sum once instead.
__device__ __forceinline__ int Product(int a, int w, bool exact) { return exact ? a * w : MulRound(a, w); }
__device__ __forceinline__ int16_t Finish(int sum, bool exact) {
  return exact ? static_cast<int16_t>((sum + (1 << 14)) >> 15) : WrapToInt16(sum);
}

// Thread x of block (x, j, z): elements 4x..4x+3 of intermediate row j of
// the samples z, z + gridDim.z, ...: the vertical taps of output row j over
// the source columns the horizontal taps reach, in Q7 (the padding past a
// sample's cols, up to its inter_stride, is stored, never read).
__global__ void __launch_bounds__(kThreads)
    Vertical(const uint8_t* __restrict__ in, ResampleShape shape, ResampleTables t, int16_t* __restrict__ inter) {
  const int e = (blockIdx.x * kThreads + threadIdx.x) * kVertical;
  const int j = blockIdx.y;
  for (int64_t s = blockIdx.z; s < shape.rows; s += gridDim.z) {
    const ResampleSampleTaps taps = t.samples[s];
    if (e >= taps.cols) continue;
    const int n = min(kVertical, taps.cols - e);
    const int64_t stride = taps.src_stride;
    const uint8_t* __restrict__ src =
        in + taps.src_offset + t.v_first[s * shape.out_h + j] * stride + int64_t{taps.x_lo} * shape.channels + e;
    const int16_t* __restrict__ w = t.weights + taps.v_weights + int64_t{j} * taps.v_taps;
    const bool exact = taps.v_taps > kResampleMostRoundedTaps;
    int sum[kVertical] = {};
    for (int k = 0; k < taps.v_taps; ++k) {
      const int weight = __ldg(w + k);
      const uint8_t* __restrict__ row = src + k * stride;
#pragma unroll
      for (int q = 0; q < kVertical; ++q) {
        if (q < n) sum[q] += Product(__ldg(row + q) << kValueShift, weight, exact);
      }
    }
    short4 values;
    values.x = Finish(sum[0], exact);
    values.y = Finish(sum[1], exact);
    values.z = Finish(sum[2], exact);
    values.w = Finish(sum[3], exact);
    *reinterpret_cast<short4*>(inter + taps.inter_offset + int64_t{j} * taps.inter_stride + e) = values;
  }
}

// Thread e of block (x, j, z): element e (pixel e / channels, channel e %
// channels) of output row j of the samples z, z + gridDim.z, ...: the
// horizontal taps over intermediate row j, back to levels, saturated.
__global__ void __launch_bounds__(kThreads)
    Horizontal(const int16_t* __restrict__ inter, ResampleShape shape, ResampleTables t, uint8_t* __restrict__ out) {
  const int row_elems = shape.out_w * shape.channels;
  const int e = blockIdx.x * kThreads + threadIdx.x;
  if (e >= row_elems) return;
  const int i = e / shape.channels;
  const int c = e - i * shape.channels;
  const int j = blockIdx.y;
  for (int64_t s = blockIdx.z; s < shape.rows; s += gridDim.z) {
    const ResampleSampleTaps taps = t.samples[s];
    const int16_t* __restrict__ src = inter + taps.inter_offset + int64_t{j} * taps.inter_stride +
                                      t.h_first[s * shape.out_w + i] * shape.channels + c;
    const int16_t* __restrict__ w = t.weights + taps.h_weights + int64_t{i} * taps.h_taps;
    const bool exact = taps.h_taps > kResampleMostRoundedTaps;
    int sum = 0;
#pragma unroll 4
    for (int k = 0; k < taps.h_taps; ++k) sum += Product(__ldg(src + k * shape.channels), __ldg(w + k), exact);
    // Q7 to a level: (sum + 64) >> 7, as the cpu's rounded multiply by 2^8.
    const int level = MulRound(Finish(sum, exact), 1 << (15 - kValueShift));
    out[(s * shape.out_h + j) * row_elems + e] = static_cast<uint8_t>(min(max(level, 0), 255));
  }
}

unsigned Blocks(int n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

cudaError_t LaunchResample(const uint8_t* in, const ResampleShape& shape, const ResampleTables& tables,
                           int16_t* intermediate, uint8_t* out, cudaStream_t stream) {
  const unsigned samples = static_cast<unsigned>(shape.rows < kMaxGridZ ? shape.rows : kMaxGridZ);
  const dim3 vertical(Blocks((shape.max_inter_stride + kVertical - 1) / kVertical), shape.out_h, samples);
  Vertical<<<vertical, kThreads, 0, stream>>>(in, shape, tables, intermediate);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  const dim3 horizontal(Blocks(shape.out_w * shape.channels), shape.out_h, samples);
  Horizontal<<<horizontal, kThreads, 0, stream>>>(intermediate, shape, tables, out);
  return cudaGetLastError();
}

}  // namespace sluice::ops::cuda
