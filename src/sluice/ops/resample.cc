#include "sluice/ops/resample.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <vector>

#if defined(__SSE4_1__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace sluice::ops {
namespace {

// Taps of one output position: the first source index and the weights.
struct Taps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;  // count[i] per output i, `max_taps` apart
  int max_taps = 0;
};

// PIL's precompute_coeffs for the bilinear (triangle) filter, over a
// window [start, start + extent) of a source of `size` pixels.
void MakeTaps(double start, double extent, int size, int out, Taps* t) {
  const double scale = extent / out;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's half-width, 1 unscaled
  t->max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t->first.assign(out, 0);
  t->count.assign(out, 0);
  t->weights.assign(static_cast<size_t>(out) * t->max_taps, 0.f);
  for (int i = 0; i < out; ++i) {
    const double center = start + (i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(std::floor(center - support + 0.5)), 0);
    const int hi = std::min(static_cast<int>(std::floor(center + support + 0.5)), size);
    double total = 0;
    float* w = &t->weights[static_cast<size_t>(i) * t->max_taps];
    int n = 0;
    for (int x = lo; x < hi && n < t->max_taps; ++x, ++n) {
      const double d = std::abs((x - center + 0.5) / filter_scale);
      const double v = d < 1 ? 1 - d : 0;
      w[n] = static_cast<float>(v);
      total += v;
    }
    if (total > 0) {
      for (int k = 0; k < n; ++k) w[k] = static_cast<float>(w[k] / total);
    }
    t->first[i] = lo;
    t->count[i] = n;
  }
}

thread_local std::vector<float> tls_rows;
thread_local std::vector<float> tls_acc;
thread_local Taps tls_h, tls_v;

// out[i * channels + c] = sum_k w[i][k] * src[(first[i] + k) * channels + c]
// for one row. RGB takes each pixel as a 4-lane vector (the fourth lane is
// the next pixel's red, weighted and dropped), one fused multiply-add per
// tap, instead of a scalar per channel.
void HorizontalRow(const uint8_t* src, const Taps& h, int out_w, int channels, int src_w, float* out) {
#if defined(__SSE4_1__) && defined(__FMA__)
  if (channels == 3) {
    for (int i = 0; i < out_w; ++i) {
      const float* w = &h.weights[static_cast<size_t>(i) * h.max_taps];
      const uint8_t* p = src + static_cast<int64_t>(h.first[i]) * 3;
      const int n = h.count[i];
      // The last pixel of a row has no fourth byte after it: read it apart.
      const int safe = h.first[i] + n < src_w ? n : n - 1;
      __m128 acc = _mm_setzero_ps();
      int k = 0;
      for (; k < safe; ++k, p += 3) {
        int32_t bytes;
        std::memcpy(&bytes, p, 4);
        const __m128 px = _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes)));
        acc = _mm_fmadd_ps(_mm_set1_ps(w[k]), px, acc);
      }
      alignas(16) float lanes[4];
      _mm_store_ps(lanes, acc);
      for (; k < n; ++k, p += 3) {
        for (int c = 0; c < 3; ++c) lanes[c] += w[k] * p[c];
      }
      out[3 * i] = lanes[0];
      out[3 * i + 1] = lanes[1];
      out[3 * i + 2] = lanes[2];
    }
    return;
  }
#endif
  for (int i = 0; i < out_w; ++i) {
    const float* w = &h.weights[static_cast<size_t>(i) * h.max_taps];
    const uint8_t* p = src + static_cast<int64_t>(h.first[i]) * channels;
    for (int c = 0; c < channels; ++c) {
      float acc = 0;
      for (int k = 0; k < h.count[i]; ++k) acc += w[k] * p[k * channels + c];
      out[i * channels + c] = acc;
    }
  }
}

}  // namespace

void ResampleBilinear(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride,
                      const Window& window, uint8_t* dst, int out_w, int out_h) {
  Taps& h = tls_h;
  Taps& v = tls_v;
  MakeTaps(window.x, window.w, src_w, out_w, &h);
  MakeTaps(window.y, window.h, src_h, out_h, &v);
  // Horizontal pass over the source rows the vertical taps reach.
  const int row_lo = v.first[0];
  const int row_hi = v.first[out_h - 1] + v.count[out_h - 1];
  const int row_elems = out_w * channels;
  std::vector<float>& rows = tls_rows;
  rows.resize(static_cast<size_t>(row_hi - row_lo) * row_elems);
  for (int y = row_lo; y < row_hi; ++y) {
    HorizontalRow(src + static_cast<int64_t>(y) * src_stride, h, out_w, channels, src_w,
                  rows.data() + static_cast<size_t>(y - row_lo) * row_elems);
  }
  // Vertical pass: each output row a weighted sum of whole rows, tap by tap
  // (contiguous rows: the inner loops vectorize).
  std::vector<float>& acc = tls_acc;
  acc.resize(static_cast<size_t>(row_elems));
  for (int j = 0; j < out_h; ++j) {
    const float* w = &v.weights[static_cast<size_t>(j) * v.max_taps];
    const float* base = rows.data() + static_cast<size_t>(v.first[j] - row_lo) * row_elems;
    float* a = acc.data();
    const float w0 = w[0];
    for (int e = 0; e < row_elems; ++e) a[e] = w0 * base[e];
    for (int k = 1; k < v.count[j]; ++k) {
      const float wk = w[k];
      const float* r = base + static_cast<size_t>(k) * row_elems;
      for (int e = 0; e < row_elems; ++e) a[e] += wk * r[e];
    }
    uint8_t* o = dst + static_cast<int64_t>(j) * row_elems;
    for (int e = 0; e < row_elems; ++e) {
      const float c = std::min(std::max(a[e], 0.f), 255.f);
      o[e] = static_cast<uint8_t>(c + 0.5f);
    }
  }
}

}  // namespace sluice::ops
