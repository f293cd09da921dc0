#include "sluice/ops/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

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
thread_local Taps tls_h, tls_v;

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
    const uint8_t* s = src + static_cast<int64_t>(y) * src_stride;
    float* o = rows.data() + static_cast<size_t>(y - row_lo) * row_elems;
    for (int i = 0; i < out_w; ++i) {
      const float* w = &h.weights[static_cast<size_t>(i) * h.max_taps];
      const uint8_t* p = s + static_cast<int64_t>(h.first[i]) * channels;
      const int n = h.count[i];
      if (channels == 3) {
        float r = 0, g = 0, b = 0;
        for (int k = 0; k < n; ++k, p += 3) {
          r += w[k] * p[0];
          g += w[k] * p[1];
          b += w[k] * p[2];
        }
        o[3 * i] = r;
        o[3 * i + 1] = g;
        o[3 * i + 2] = b;
      } else {
        for (int c = 0; c < channels; ++c) {
          float acc = 0;
          for (int k = 0; k < n; ++k) acc += w[k] * p[k * channels + c];
          o[i * channels + c] = acc;
        }
      }
    }
  }
  // Vertical pass: each output row a weighted sum of whole rows (vectorizes).
  for (int j = 0; j < out_h; ++j) {
    const float* w = &v.weights[static_cast<size_t>(j) * v.max_taps];
    const float* base = rows.data() + static_cast<size_t>(v.first[j] - row_lo) * row_elems;
    uint8_t* o = dst + static_cast<int64_t>(j) * row_elems;
    const int n = v.count[j];
    for (int e = 0; e < row_elems; ++e) {
      float acc = 0;
      for (int k = 0; k < n; ++k) acc += w[k] * base[static_cast<size_t>(k) * row_elems + e];
      const float c = std::min(std::max(acc, 0.f), 255.f);
      o[e] = static_cast<uint8_t>(c + 0.5f);
    }
  }
}

}  // namespace sluice::ops
