#include "sluice/ops/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SLUICE_RESAMPLE_AVX2 1
#endif

namespace sluice::ops {
namespace {

// Taps of every output position: `taps` weights each (zero-padded), the
// first at source index first[i]. A fixed count lets the kernels run
// without per-pixel branches; first[i] + taps never passes the source.
struct Taps {
  std::vector<int> first;
  std::vector<float> weights;  // taps per output
  int taps = 0;
};

// PIL's precompute_coeffs for the bilinear (triangle) filter, over a
// window [start, start + extent) of a source of `size` pixels.
void MakeTaps(double start, double extent, int size, int out, Taps* t) {
  const double scale = extent / out;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's half-width, 1 unscaled
  const int max_taps = std::min(static_cast<int>(std::ceil(support)) * 2 + 1, size);
  thread_local std::vector<double> w;
  thread_local std::vector<int> lo, count;
  w.assign(static_cast<size_t>(out) * max_taps, 0.0);
  lo.assign(out, 0);
  count.assign(out, 0);
  int taps = 1;
  for (int i = 0; i < out; ++i) {
    const double center = start + (i + 0.5) * scale;
    lo[i] = std::max(static_cast<int>(std::floor(center - support + 0.5)), 0);
    const int hi = std::min(static_cast<int>(std::floor(center + support + 0.5)), size);
    double total = 0;
    int n = 0;
    for (int x = lo[i]; x < hi && n < max_taps; ++x, ++n) {
      const double d = std::abs((x - center + 0.5) / filter_scale);
      const double v = d < 1 ? 1 - d : 0;
      w[static_cast<size_t>(i) * max_taps + n] = v;
      total += v;
    }
    // Trailing zero weights (the triangle's ends) cost a tap each for nothing.
    while (n > 1 && w[static_cast<size_t>(i) * max_taps + n - 1] == 0) --n;
    if (total > 0) {
      for (int k = 0; k < n; ++k) w[static_cast<size_t>(i) * max_taps + k] /= total;
    }
    count[i] = n;
    taps = std::max(taps, n);
  }
  t->taps = taps;
  t->first.assign(out, 0);
  t->weights.assign(static_cast<size_t>(out) * taps, 0.f);
  for (int i = 0; i < out; ++i) {
    const int first = std::min(lo[i], size - taps);  // shift left to stay inside
    const int shift = lo[i] - first;
    t->first[i] = first;
    for (int k = 0; k < count[i]; ++k) {
      t->weights[static_cast<size_t>(i) * taps + shift + k] = static_cast<float>(w[static_cast<size_t>(i) * max_taps + k]);
    }
  }
}

uint8_t ToByte(float v) { return static_cast<uint8_t>(std::min(std::max(v, 0.f), 255.f) + 0.5f); }

// Vertical pass of one output row: out[e] = sum_k w[k] * rows[k][e] for
// e < n, the rows being `stride` apart from `src`. TAPS > 0 fixes the tap
// count at compile time (unrolled, even and odd taps in separate chains);
// 0 takes it from `taps`.
template <int TAPS>
void VerticalRow(const uint8_t* src, int64_t stride, const float* w, int taps, int n, float* out) {
  if (TAPS > 0) taps = TAPS;
  int e = 0;
#ifdef SLUICE_RESAMPLE_AVX2
  auto widen = [](__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); };
  for (; e + 16 <= n; e += 16) {
    __m256 even0 = _mm256_setzero_ps(), even1 = _mm256_setzero_ps();
    __m256 odd0 = _mm256_setzero_ps(), odd1 = _mm256_setzero_ps();
    for (int k = 0; k < taps; ++k) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k * stride + e));
      const __m256 wk = _mm256_set1_ps(w[k]);
      if (k % 2 == 0) {
        even0 = _mm256_fmadd_ps(wk, widen(bytes), even0);
        even1 = _mm256_fmadd_ps(wk, widen(_mm_srli_si128(bytes, 8)), even1);
      } else {
        odd0 = _mm256_fmadd_ps(wk, widen(bytes), odd0);
        odd1 = _mm256_fmadd_ps(wk, widen(_mm_srli_si128(bytes, 8)), odd1);
      }
    }
    _mm256_storeu_ps(out + e, _mm256_add_ps(even0, odd0));
    _mm256_storeu_ps(out + e + 8, _mm256_add_ps(even1, odd1));
  }
#endif
  for (; e < n; ++e) {
    float acc = 0;
    for (int k = 0; k < taps; ++k) acc += w[k] * src[k * stride + e];
    out[e] = acc;
  }
}

// Horizontal pass of one row of RGB floats (padded by a float after its
// end) into RGB floats (`out` has a float of room after its end): two
// output pixels per 8-lane vector, each pixel's three channels plus a lane
// that the next pixel's store overwrites. Two pairs at a time, so that two
// chains of multiply-adds overlap.
template <int TAPS>
void HorizontalRowRgb(const float* row, const Taps& h, const float* pair_weights, int out_w, float* out) {
  int i = 0;
  const int taps = TAPS > 0 ? TAPS : h.taps;
#ifdef SLUICE_RESAMPLE_AVX2
  auto pair = [&](int i) {
    const float* p0 = row + h.first[i] * 3;
    const float* p1 = row + h.first[i + 1] * 3;
    const float* w = pair_weights + static_cast<size_t>(i / 2) * taps * 8;
    __m256 acc = _mm256_mul_ps(_mm256_load_ps(w), _mm256_set_m128(_mm_loadu_ps(p1), _mm_loadu_ps(p0)));
    for (int k = 1; k < taps; ++k) {
      const __m256 px = _mm256_set_m128(_mm_loadu_ps(p1 + 3 * k), _mm_loadu_ps(p0 + 3 * k));
      acc = _mm256_fmadd_ps(_mm256_load_ps(w + 8 * k), px, acc);
    }
    return acc;
  };
  for (; i + 4 <= out_w; i += 4) {
    const __m256 a = pair(i), b = pair(i + 2);
    _mm_storeu_ps(out + 3 * i, _mm256_castps256_ps128(a));
    _mm_storeu_ps(out + 3 * i + 3, _mm256_extractf128_ps(a, 1));
    _mm_storeu_ps(out + 3 * i + 6, _mm256_castps256_ps128(b));
    _mm_storeu_ps(out + 3 * i + 9, _mm256_extractf128_ps(b, 1));
  }
#endif
  for (; i < out_w; ++i) {
    const float* p = row + h.first[i] * 3;
    const float* w = &h.weights[static_cast<size_t>(i) * taps];
    float acc[3] = {0, 0, 0};
    for (int k = 0; k < taps; ++k) {
      for (int c = 0; c < 3; ++c) acc[c] += w[k] * p[3 * k + c];
    }
    for (int c = 0; c < 3; ++c) out[3 * i + c] = acc[c];
  }
}

// Rounds and clamps n floats to bytes.
void ToBytes(const float* in, int n, uint8_t* out) {
  int e = 0;
#ifdef SLUICE_RESAMPLE_AVX2
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.f), half = _mm256_set1_ps(0.5f);
  auto ints = [&](const float* p) {
    const __m256 v = _mm256_add_ps(_mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(p), zero), top), half);
    return _mm256_cvttps_epi32(v);
  };
  for (; e + 16 <= n; e += 16) {
    // packs work within 128-bit lanes: put the 16 bytes back in order.
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packus_epi32(ints(in + e), ints(in + e + 8)), 0xd8);
    const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + e), bytes);
  }
#endif
  for (; e < n; ++e) out[e] = ToByte(in[e]);
}

void HorizontalRow(const float* row, const Taps& h, int out_w, int channels, float* out) {
  for (int i = 0; i < out_w; ++i) {
    const float* p = row + static_cast<int64_t>(h.first[i]) * channels;
    const float* w = &h.weights[static_cast<size_t>(i) * h.taps];
    for (int c = 0; c < channels; ++c) {
      float acc = 0;
      for (int k = 0; k < h.taps; ++k) acc += w[k] * p[k * channels + c];
      out[i * channels + c] = acc;
    }
  }
}

// Each pair of outputs' weights as 8 lanes per tap, w[i][k] x4 then
// w[i+1][k] x4, in `storage` from a 32-byte boundary (returned).
const float* PairWeights(const Taps& h, int out_w, std::vector<float>* storage) {
  const int taps = h.taps;
  storage->assign(static_cast<size_t>(out_w / 2) * taps * 8 + 8, 0.f);
  float* base = storage->data();
  base += (8 - (reinterpret_cast<uintptr_t>(base) / sizeof(float)) % 8) % 8;
  for (int i = 0; i + 2 <= out_w; i += 2) {
    for (int k = 0; k < taps; ++k) {
      float* lanes = base + (static_cast<size_t>(i / 2) * taps + k) * 8;
      for (int l = 0; l < 4; ++l) {
        lanes[l] = h.weights[static_cast<size_t>(i) * taps + k];
        lanes[4 + l] = h.weights[static_cast<size_t>(i + 1) * taps + k];
      }
    }
  }
  return base;
}

// The row kernels with the tap count fixed for the common counts (W3's
// shrinks take 2 to 8 taps), the general loop for the rest.
struct RowKernels {
  void (*vertical)(const uint8_t*, int64_t, const float*, int, int, float*);
  void (*horizontal_rgb)(const float*, const Taps&, const float*, int, float*);
};

template <int TAPS>
RowKernels KernelsFor() {
  return {VerticalRow<TAPS>, HorizontalRowRgb<TAPS>};
}

RowKernels SelectKernels(int taps) {
  switch (taps) {
    case 2: return KernelsFor<2>();
    case 3: return KernelsFor<3>();
    case 4: return KernelsFor<4>();
    case 5: return KernelsFor<5>();
    case 6: return KernelsFor<6>();
    case 7: return KernelsFor<7>();
    case 8: return KernelsFor<8>();
    default: return KernelsFor<0>();
  }
}

thread_local Taps tls_h, tls_v;
thread_local std::vector<float> tls_row, tls_out_row, tls_pairs;

// Rounds and clamps n floats in place to the levels ToBytes would write.
void ToLevels(float* values, int n) {
  int e = 0;
#ifdef SLUICE_RESAMPLE_AVX2
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.f), half = _mm256_set1_ps(0.5f);
  for (; e + 8 <= n; e += 8) {
    const __m256 v = _mm256_add_ps(_mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(values + e), zero), top), half);
    _mm256_storeu_ps(values + e, _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
  }
#endif
  for (; e < n; ++e) values[e] = static_cast<float>(ToByte(values[e]));
}

// Vertical first, then horizontal: when shrinking (W3's crops), the
// horizontal pass, the costlier one per element, then runs on the output's
// rows only instead of on every source row the window covers; the vertical
// pass reads bytes straight from the source, 16 lanes at a time. Each
// output row goes to `row` as unrounded floats.
template <typename RowFn>
void Resample(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride, const Window& window,
              int out_w, int out_h, RowFn row_out) {
  Taps& h = tls_h;
  Taps& v = tls_v;
  MakeTaps(window.x, window.w, src_w, out_w, &h);
  MakeTaps(window.y, window.h, src_h, out_h, &v);
  // The columns the horizontal taps reach.
  const int x_lo = h.first[0];
  const int x_hi = h.first[out_w - 1] + h.taps;
  for (int& f : h.first) f -= x_lo;
  const int row_elems = (x_hi - x_lo) * channels;
  std::vector<float>& row = tls_row;
  row.resize(static_cast<size_t>(row_elems) + 8);  // the RGB kernel reads a float past the end
  row[row_elems] = 0;
  const bool rgb = channels == 3;
  const float* pairs = rgb ? PairWeights(h, out_w, &tls_pairs) : nullptr;
  std::vector<float>& out_row = tls_out_row;
  out_row.resize(static_cast<size_t>(out_w) * channels + 1);
  const uint8_t* columns = src + static_cast<int64_t>(x_lo) * channels;
  const auto vertical = SelectKernels(v.taps).vertical;
  const auto horizontal_rgb = SelectKernels(h.taps).horizontal_rgb;
  for (int j = 0; j < out_h; ++j) {
    vertical(columns + v.first[j] * src_stride, src_stride, &v.weights[static_cast<size_t>(j) * v.taps], v.taps,
             row_elems, row.data());
    if (rgb) {
      horizontal_rgb(row.data(), h, pairs, out_w, out_row.data());
    } else {
      HorizontalRow(row.data(), h, out_w, channels, out_row.data());
    }
    row_out(j, out_row.data());
  }
}

}  // namespace

void ResampleBilinear(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride,
                      const Window& window, uint8_t* dst, int out_w, int out_h) {
  const int n = out_w * channels;
  Resample(src, src_w, src_h, channels, src_stride, window, out_w, out_h,
           [&](int y, float* values) { ToBytes(values, n, dst + static_cast<int64_t>(y) * n); });
}

void ResampleBilinearRows(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride,
                          const Window& window, int out_w, int out_h,
                          absl::FunctionRef<void(int y, const float* values)> row) {
  const int n = out_w * channels;
  Resample(src, src_w, src_h, channels, src_stride, window, out_w, out_h, [&](int y, float* values) {
    ToLevels(values, n);
    row(y, values);
  });
}

}  // namespace sluice::ops
