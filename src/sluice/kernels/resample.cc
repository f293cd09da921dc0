// Resampling is compiled once per SIMD target (Highway's foreach_target;
// AVX2 and AVX-512 take the intrinsics paths) and the best the CPU has is
// chosen at run time. Every path computes the same fixed-point values.
#include "sluice/kernels/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sluice/kernels/resample.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

#ifndef SLUICE_KERNELS_RESAMPLE_ONCE_
#define SLUICE_KERNELS_RESAMPLE_ONCE_
namespace sluice::kernels::resample_internal {

// Sixteen lanes per AVX2 vector of the fixed-point values (resample.h),
// twice float's, and no int/float conversions. Every path, SIMD or scalar,
// computes exactly the same roundings, so results do not depend on the CPU.
constexpr int kBlock = 16;  // rows per block, and lanes per vector

// `n` weights, `scale` times the filter's values `w` (>= 0), in Q15
// summing to exactly 2^15, so that a flat image stays flat: each weight is
// the step between its running total's rounded value and the one before,
// within one of its exact value however many taps there are (rounding each
// weight on its own, thousands of taps' errors added up past what any one
// weight could take back). A lone weight of 1 is 2^15 - 1, which int16 can
// hold (an error of 0.008 levels at 255).
void Quantize(const double* w, int n, double scale, int16_t* out) {
  double running = 0;
  int before = 0;
  for (int k = 0; k < n; ++k) {
    running += w[k] * scale;
    const int total = static_cast<int>(std::lround(running * kWeightOne));
    out[k] = static_cast<int16_t>(std::min(total - before, kWeightOne - 1));
    before = total;
  }
}

void MakeTaps(double start, double extent, int size, int out, bool inside, Taps* t) {
  const double scale = extent / out;
  const double filter_scale = std::max(scale, 1.0);
  const double inverse = 1.0 / filter_scale;
  const double support = filter_scale;  // the triangle's half-width, 1 unscaled
  // The pixels it may read (a window's whole pixels: a crop's edges are whole).
  const int begin = inside ? std::max(static_cast<int>(std::floor(start + 1e-6)), 0) : 0;
  const int end =
      inside ? std::max(std::min(static_cast<int>(std::ceil(start + extent - 1e-6)), size), begin + 1) : size;
  const int max_taps = std::min(static_cast<int>(std::ceil(support)) * 2 + 1, end - begin);
  thread_local std::vector<double> w, norm;
  thread_local std::vector<int> lo, count;
  w.resize(static_cast<size_t>(out) * max_taps);
  norm.resize(out);
  lo.resize(out);
  count.resize(out);
  int taps = 1;
  for (int i = 0; i < out; ++i) {
    const double center = start + (i + 0.5) * scale;
    lo[i] = std::max(static_cast<int>(std::floor(center - support + 0.5)), begin);
    const int hi = std::min(static_cast<int>(std::floor(center + support + 0.5)), end);
    double* wi = &w[static_cast<size_t>(i) * max_taps];
    double total = 0;
    int n = 0;
    for (int x = lo[i]; x < hi && n < max_taps; ++x, ++n) {
      const double d = std::abs((x - center + 0.5) * inverse);
      wi[n] = d < 1 ? 1 - d : 0;
      total += wi[n];
    }
    // Trailing zero weights (the triangle's ends) cost a tap each for nothing.
    while (n > 1 && wi[n - 1] == 0) --n;
    norm[i] = total > 0 ? 1 / total : 1;
    count[i] = n;
    taps = std::max(taps, n);
  }
  t->taps = taps;
  t->first.resize(out);
  t->weights.assign(static_cast<size_t>(out) * taps, 0);
  for (int i = 0; i < out; ++i) {
    const int first = std::min(lo[i], end - taps);  // shift left to stay inside
    t->first[i] = first;
    Quantize(&w[static_cast<size_t>(i) * max_taps], count[i], norm[i],
             &t->weights[static_cast<size_t>(i) * taps + (lo[i] - first)]);
  }
}

struct Scratch {
  std::vector<int16_t> rows, cols, out_cols, out_rows;
  std::vector<int32_t> sums;  // a vertical pass's exact sums (kMostRoundedTaps)
};
thread_local Taps tls_h, tls_v;
thread_local Scratch tls_scratch;

int RoundUp(int n, int to) { return (n + to - 1) / to * to; }

}  // namespace sluice::kernels::resample_internal
#endif  // SLUICE_KERNELS_RESAMPLE_ONCE_

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define SLUICE_RESAMPLE_AVX2 1
#else
#define SLUICE_RESAMPLE_AVX2 0
#endif

HWY_BEFORE_NAMESPACE();
namespace sluice::kernels {
namespace HWY_NAMESPACE {
namespace {

using namespace resample_internal;  // NOLINT: the shared geometry and scratch

int16_t MulRound(int16_t a, int16_t w) { return static_cast<int16_t>((int32_t{a} * w + (1 << 14)) >> 15); }

// Vertical pass of one output row: out[e] = sum_k w[k] * (rows[k][e] << 7)
// for e < n, the rows being `stride` apart from `src`. TAPS > 0 fixes the
// tap count at compile time (unrolled); 0 takes it from `taps`.
template <int TAPS>
void VerticalRow(const uint8_t* src, int64_t stride, const int16_t* w, int taps, int n, int16_t* out) {
  if (TAPS > 0) taps = TAPS;
  int e = 0;
#if SLUICE_RESAMPLE_AVX2
  // The weights are broadcast once: `out` may alias them as far as the
  // compiler knows, so it would reload them every step.
  __m256i wv[TAPS > 0 ? TAPS : 1];
  if (TAPS > 0) {
    for (int k = 0; k < TAPS; ++k) wv[k] = _mm256_set1_epi16(w[k]);
  }
  for (; e + kBlock <= n; e += kBlock) {
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < taps; ++k) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k * stride + e));
      const __m256i values = _mm256_slli_epi16(_mm256_cvtepu8_epi16(bytes), kValueShift);
      acc = _mm256_add_epi16(acc, _mm256_mulhrs_epi16(values, TAPS > 0 ? wv[k] : _mm256_set1_epi16(w[k])));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + e), acc);
  }
#endif
  for (; e < n; ++e) {
    int16_t acc = 0;
    for (int k = 0; k < taps; ++k) acc += MulRound(static_cast<int16_t>(src[k * stride + e] << kValueShift), w[k]);
    out[e] = acc;
  }
}

// A Q15-weighted sum in Q15 (exact int32 products) to its rounded value.
int16_t RoundQ15(int32_t sum) { return static_cast<int16_t>((sum + (1 << 14)) >> 15); }

// VerticalRow over more than kMostRoundedTaps taps: exact products summed
// in int32 (at most 32640 * 2^15, inside int32), rounded once.
void VerticalRowExact(const uint8_t* src, int64_t stride, const int16_t* w, int taps, int n, int16_t* out) {
  std::vector<int32_t>& sums = tls_scratch.sums;
  sums.assign(n, 0);
  for (int k = 0; k < taps; ++k) {
    const int32_t weight = w[k];
    const uint8_t* row = src + k * stride;
    for (int e = 0; e < n; ++e) sums[e] += (int32_t{row[e]} << kValueShift) * weight;
  }
  for (int e = 0; e < n; ++e) out[e] = RoundQ15(sums[e]);
}

// 16 rows of 16 int16 (`in`, rows `in_stride` apart) to 16 rows of 16
// (`out`, rows `out_stride` apart): out[e][r] = in[r][e].
void Transpose16(const int16_t* in, int64_t in_stride, int16_t* out, int64_t out_stride) {
#if SLUICE_RESAMPLE_AVX2
  __m256i a[kBlock], b[kBlock];
  for (int r = 0; r < kBlock; ++r) a[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + r * in_stride));
  // Within each 128-bit lane, an 8x8 transpose of each half of the rows
  // (pairs of 16, then 32, then 64 bits); then the lanes trade places.
  for (int g = 0; g < kBlock; g += 8) {
    for (int i = 0; i < 8; i += 2) {
      b[g + i] = _mm256_unpacklo_epi16(a[g + i], a[g + i + 1]);
      b[g + i + 1] = _mm256_unpackhi_epi16(a[g + i], a[g + i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
      for (int j = 0; j < 2; ++j) {
        a[g + i + 2 * j] = _mm256_unpacklo_epi32(b[g + i + j], b[g + i + j + 2]);
        a[g + i + 2 * j + 1] = _mm256_unpackhi_epi32(b[g + i + j], b[g + i + j + 2]);
      }
    }
    for (int i = 0; i < 4; ++i) {
      b[g + 2 * i] = _mm256_unpacklo_epi64(a[g + i], a[g + i + 4]);
      b[g + 2 * i + 1] = _mm256_unpackhi_epi64(a[g + i], a[g + i + 4]);
    }
  }
  // b[g + c] now holds column c (lane 0) and column c + 8 (lane 1) of rows
  // g..g+7.
  for (int c = 0; c < 8; ++c) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c * out_stride),
                        _mm256_permute2x128_si256(b[c], b[8 + c], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (c + 8) * out_stride),
                        _mm256_permute2x128_si256(b[c], b[8 + c], 0x31));
  }
#else
  for (int r = 0; r < kBlock; ++r) {
    for (int e = 0; e < kBlock; ++e) out[e * out_stride + r] = in[r * in_stride + e];
  }
#endif
}

// Horizontal pass over a block of rows held column by column (`cols`: for
// each source element, 16 rows), into the output the same way: pixel i's
// channel c at out[i * pixel_step + c * channel_step], 16 rows, as levels.
// Vectorized across the rows, so every lane is used whatever the channel
// count and however the taps fall.
template <int TAPS>
void HorizontalBlock(const int16_t* cols, const Taps& h, int out_w, int channels, int64_t pixel_step,
                     int64_t channel_step, int16_t* out) {
  const int taps = TAPS > 0 ? TAPS : h.taps;
  const int64_t step = int64_t{channels} * kBlock;  // from one tap to the next
  for (int i = 0; i < out_w; ++i) {
    const int16_t* w = &h.weights[static_cast<size_t>(i) * taps];
    const int16_t* src = cols + h.first[i] * step;
    int16_t* dst = out + i * pixel_step;
#if SLUICE_RESAMPLE_AVX2
    __m256i wv[TAPS > 0 ? TAPS : 1];
    if (TAPS > 0) {
      for (int k = 0; k < TAPS; ++k) wv[k] = _mm256_set1_epi16(w[k]);
    }
    for (int c = 0; c < channels; ++c) {
      __m256i acc = _mm256_setzero_si256();
      for (int k = 0; k < taps; ++k) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k * step + c * kBlock));
        acc = _mm256_add_epi16(acc, _mm256_mulhrs_epi16(v, TAPS > 0 ? wv[k] : _mm256_set1_epi16(w[k])));
      }
      // Back to levels: (acc + 64) >> 7, as a rounded multiply by 2^8.
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c * channel_step),
                          _mm256_mulhrs_epi16(acc, _mm256_set1_epi16(1 << (15 - kValueShift))));
    }
#else
    for (int c = 0; c < channels; ++c) {
      for (int r = 0; r < kBlock; ++r) {
        int16_t acc = 0;
        for (int k = 0; k < taps; ++k) acc += MulRound(src[k * step + c * kBlock + r], w[k]);
        dst[c * channel_step + r] = MulRound(acc, 1 << (15 - kValueShift));
      }
    }
#endif
  }
}

// HorizontalBlock over more than kMostRoundedTaps taps, as VerticalRowExact.
void HorizontalBlockExact(const int16_t* cols, const Taps& h, int out_w, int channels, int64_t pixel_step,
                          int64_t channel_step, int16_t* out) {
  const int64_t step = int64_t{channels} * kBlock;
  for (int i = 0; i < out_w; ++i) {
    const int16_t* w = &h.weights[static_cast<size_t>(i) * h.taps];
    const int16_t* src = cols + h.first[i] * step;
    for (int c = 0; c < channels; ++c) {
      int32_t sums[kBlock] = {};
      for (int k = 0; k < h.taps; ++k) {
        const int32_t weight = w[k];
        const int16_t* values = src + k * step + c * kBlock;
        for (int r = 0; r < kBlock; ++r) sums[r] += int32_t{values[r]} * weight;
      }
      int16_t* dst = out + i * pixel_step + c * channel_step;
      for (int r = 0; r < kBlock; ++r) dst[r] = MulRound(RoundQ15(sums[r]), 1 << (15 - kValueShift));
    }
  }
}

// The horizontal kernel with the tap count fixed for the common counts
// (W3's shrinks take 2 to 8 taps), the general loop for the rest.
using HorizontalFn = void (*)(const int16_t*, const Taps&, int, int, int64_t, int64_t, int16_t*);
using VerticalFn = void (*)(const uint8_t*, int64_t, const int16_t*, int, int, int16_t*);

template <int TAPS>
std::pair<VerticalFn, HorizontalFn> KernelsFor() {
  return {VerticalRow<TAPS>, HorizontalBlock<TAPS>};
}

std::pair<VerticalFn, HorizontalFn> SelectKernels(int taps) {
  switch (taps) {
    case 2:
      return KernelsFor<2>();
    case 3:
      return KernelsFor<3>();
    case 4:
      return KernelsFor<4>();
    case 5:
      return KernelsFor<5>();
    case 6:
      return KernelsFor<6>();
    case 7:
      return KernelsFor<7>();
    case 8:
      return KernelsFor<8>();
    default:
      if (taps > kMostRoundedTaps) return {VerticalRowExact, HorizontalBlockExact};
      return KernelsFor<0>();
  }
}

uint8_t ToByte(int16_t level) { return static_cast<uint8_t>(std::clamp<int16_t>(level, 0, 255)); }

// n levels (int16, within 0..255 but for rounding at the top) to bytes.
void ToBytes(const int16_t* in, int n, uint8_t* out) {
  int e = 0;
#if SLUICE_RESAMPLE_AVX2
  for (; e + 2 * kBlock <= n; e += 2 * kBlock) {
    // packus works within 128-bit lanes: put the 32 bytes back in order.
    const __m256i packed = _mm256_packus_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + e)),
                                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + e + kBlock)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + e), _mm256_permute4x64_epi64(packed, 0xd8));
  }
#endif
  for (; e < n; ++e) out[e] = ToByte(in[e]);
}

// Vertical first, then horizontal: when shrinking (W3's crops), the
// horizontal pass then runs on the output's rows only instead of on every
// source row the window covers. Output rows are made 16 at a time: the
// vertical pass writes them row by row (16 elements a step), a transpose
// turns them into columns, the horizontal pass computes 16 rows per output
// element, and a transpose turns those back into rows, which go to
// `emit(y, levels)` as int16 levels: interleaved (HWC), or with `planar`
// channel by channel, each RoundUp(out_w, 16) apart.
template <typename EmitFn>
void Resample(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride, const Window& window,
              int out_w, int out_h, bool planar, EmitFn emit) {
  Taps& h = tls_h;
  Taps& v = tls_v;
  MakeTaps(window.x, window.w, src_w, out_w, window.inside, &h);
  MakeTaps(window.y, window.h, src_h, out_h, window.inside, &v);
  // The columns the horizontal taps reach.
  const int x_lo = h.first[0];
  const int x_hi = h.first[out_w - 1] + h.taps;
  for (int& f : h.first) f -= x_lo;
  const int n = (x_hi - x_lo) * channels, n_pad = RoundUp(n, kBlock);
  const int out_pad = planar ? channels * RoundUp(out_w, kBlock) : RoundUp(out_w * channels, kBlock);
  const int64_t pixel_step = planar ? kBlock : int64_t{channels} * kBlock;
  const int64_t channel_step = planar ? int64_t{RoundUp(out_w, kBlock)} * kBlock : kBlock;
  // Padding (elements past n or past the output's, rows past out_h) only
  // reaches lanes that are thrown away; resize() keeps every element
  // initialized.
  Scratch& s = tls_scratch;
  s.rows.resize(static_cast<size_t>(kBlock) * n_pad);
  s.cols.resize(static_cast<size_t>(n_pad) * kBlock);
  s.out_cols.resize(static_cast<size_t>(out_pad) * kBlock);
  s.out_rows.resize(static_cast<size_t>(kBlock) * out_pad);
  const uint8_t* columns = src + static_cast<int64_t>(x_lo) * channels;
  const VerticalFn vertical = SelectKernels(v.taps).first;
  const HorizontalFn horizontal = SelectKernels(h.taps).second;
  for (int j0 = 0; j0 < out_h; j0 += kBlock) {
    const int rows = std::min(kBlock, out_h - j0);
    for (int r = 0; r < rows; ++r) {
      const int j = j0 + r;
      vertical(columns + v.first[j] * src_stride, src_stride, &v.weights[static_cast<size_t>(j) * v.taps], v.taps, n,
               &s.rows[static_cast<size_t>(r) * n_pad]);
    }
    for (int e = 0; e < n_pad; e += kBlock) {
      Transpose16(&s.rows[e], n_pad, &s.cols[static_cast<size_t>(e) * kBlock], kBlock);
    }
    horizontal(s.cols.data(), h, out_w, channels, pixel_step, channel_step, s.out_cols.data());
    for (int e = 0; e < out_pad; e += kBlock) {
      Transpose16(&s.out_cols[static_cast<size_t>(e) * kBlock], kBlock, &s.out_rows[e], out_pad);
    }
    for (int r = 0; r < rows; ++r) emit(j0 + r, &s.out_rows[static_cast<size_t>(r) * out_pad]);
  }
}

}  // namespace

void ResampleBytesImpl(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride, const Window& window,
                       uint8_t* dst, int out_w, int out_h) {
  const int n = out_w * channels;
  Resample(src, src_w, src_h, channels, src_stride, window, out_w, out_h, /*planar=*/false,
           [&](int y, const int16_t* levels) { ToBytes(levels, n, dst + static_cast<int64_t>(y) * n); });
}

void ResamplePlanesImpl(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride,
                        const Window& window, int out_w, int out_h,
                        absl::FunctionRef<void(int y, const int16_t* levels, int64_t channel_stride)> row) {
  const int64_t channel_stride = RoundUp(out_w, kBlock);
  Resample(src, src_w, src_h, channels, src_stride, window, out_w, out_h, /*planar=*/true,
           [&](int y, const int16_t* levels) { row(y, levels, channel_stride); });
}

}  // namespace HWY_NAMESPACE
}  // namespace sluice::kernels
HWY_AFTER_NAMESPACE();

#undef SLUICE_RESAMPLE_AVX2

#if HWY_ONCE
namespace sluice::kernels {

HWY_EXPORT(ResampleBytesImpl);
HWY_EXPORT(ResamplePlanesImpl);

void ResampleBilinear(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride, const Window& window,
                      uint8_t* dst, int out_w, int out_h) {
  HWY_DYNAMIC_DISPATCH(ResampleBytesImpl)(src, src_w, src_h, channels, src_stride, window, dst, out_w, out_h);
}

void ResampleBilinearPlanes(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride,
                            const Window& window, int out_w, int out_h,
                            absl::FunctionRef<void(int y, const int16_t* levels, int64_t channel_stride)> row) {
  HWY_DYNAMIC_DISPATCH(ResamplePlanesImpl)(src, src_w, src_h, channels, src_stride, window, out_w, out_h, row);
}

}  // namespace sluice::kernels
#endif  // HWY_ONCE
