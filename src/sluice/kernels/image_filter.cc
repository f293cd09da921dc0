#include "sluice/kernels/image_filter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "sluice/kernels/border.h"
#include "sluice/kernels/value_loops.h"

namespace sluice::kernels {
namespace {

// Per-thread scratch of the values an image is held in while filtering (S:
// float for float images; for uint8 ones int16 fixed point to blur, uint8
// to dilate), grown once and reused for every image.
template <typename S>
struct Scratch {
  std::vector<S> padded;       // the image with horizontal borders
  std::vector<S> rows;         // after the horizontal pass
  std::vector<S> fill;         // one row of the fill value
  std::vector<uint8_t> bytes;  // uint8 rows with their borders, before they are held as S
  std::vector<const S*> in_ptrs, window;
  std::vector<S*> mid_ptrs;
  template <typename P>
  P* Get(std::vector<P>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};
template <typename S>
Scratch<S>& ThreadScratch() {
  thread_local Scratch<S> s;
  return s;
}

// The row pointers of an image's output.
template <typename T>
T* const* OutputRows(T* dst, int64_t h, int64_t n) {
  thread_local std::vector<T*> rows;
  rows.resize(h);
  for (int64_t y = 0; y < h; ++y) rows[y] = dst + y * n;
  return rows.data();
}

// out[i] = row[from[i]], or `fill` where from[i] < 0.
template <typename S>
void FillBorder(const S* row, const std::vector<int32_t>& from, S fill, S* out) {
  for (size_t i = 0; i < from.size(); ++i) out[i] = from[i] < 0 ? fill : row[from[i]];
}

// Holds the rows of `src` as S with horizontal borders, `stride` apart.
template <typename S, typename T>
void HoldRows(const T* src, const FilterShape& f, S fill, S* padded, int64_t stride, Scratch<S>& s) {
  const ImageDims& d = f.dims;
  const int64_t n = d.row_elems(), c = d.c, rx = f.kw / 2;
  if constexpr (std::is_same_v<T, uint8_t>) {
    if (f.shuffle && fill == S{0}) {  // the shuffle's 0 is the fill (uint8's lowest; the blur has none)
      if constexpr (std::is_same_v<S, uint8_t>) {
        PadRows(src, d.h, n, *f.shuffle, padded, stride);
      } else {
        uint8_t* bytes = s.Get(s.bytes, d.h * stride);
        PadRows(src, d.h, n, *f.shuffle, bytes, stride);
        U8ToFixed(bytes, d.h * stride, padded);
      }
      return;
    }
  }
  for (int64_t y = 0; y < d.h; ++y) {
    const T* in = src + y * n;
    S* p = padded + y * stride;
    if constexpr (std::is_same_v<S, T>) {
      std::copy(in, in + n, p + rx * c);
    } else {
      U8ToFixed(in, n, p + rx * c);
    }
  }
  // The borders once every row's interior is held: loads of values stored
  // just before stalled on store forwarding.
  for (int64_t y = 0; y < d.h; ++y) {
    S* p = padded + y * stride;
    FillBorder(p + rx * c, f.borders.left, fill, p);
    FillBorder(p + rx * c, f.borders.right, fill, p + (rx + d.w) * c);
  }
}

// Holds `src` as S with horizontal borders, and sets up the row pointers of
// both passes. Rows are spaced with kRowSlackBytes to spare (the integer
// passes read and write whole vectors past a row's end).
template <typename S, typename T>
void Prepare(const T* src, const FilterShape& f, S fill, Scratch<S>& s) {
  const ImageDims& d = f.dims;
  const int64_t slack = kRowSlackBytes / static_cast<int64_t>(sizeof(S));
  const int64_t padded_row = (d.w + f.kw - 1) * d.c + slack, mid_row = d.row_elems() + slack;
  S* padded = s.Get(s.padded, d.h * padded_row);
  S* rows = s.Get(s.rows, d.h * mid_row);
  S* fill_row = s.Get(s.fill, mid_row);
  // Only a constant border reads rows of the fill (its first row is outside).
  if (f.ymap.front() < 0) std::fill(fill_row, fill_row + mid_row, fill);
  const S** in_ptrs = s.Get(s.in_ptrs, d.h);
  S** mid_ptrs = s.Get(s.mid_ptrs, d.h);
  const S** window = s.Get(s.window, d.h + f.kh - 1);
  for (int64_t y = 0; y < d.h; ++y) {
    in_ptrs[y] = padded + y * padded_row;
    mid_ptrs[y] = rows + y * mid_row;
  }
  for (int64_t t = 0; t < d.h + f.kh - 1; ++t) {
    window[t] = f.ymap[t] < 0 ? fill_row : rows + f.ymap[t] * mid_row;
  }
  HoldRows(src, f, fill, padded, padded_row, s);
}

// Taps below this weight (of a kernel summing to 1) change no output by a
// float32 rounding step: the passes skip them. A small sigma leaves few
// taps of an 11-tap kernel (sigma 0.5: 7; 0.1: 1).
constexpr float kNegligibleTap = 1e-9f;

// How many taps at each end of a symmetric kernel are negligible: in fixed
// point, those that round to 0.
bool Negligible(float w) { return w < kNegligibleTap; }
bool Negligible(int16_t w) { return w == 0; }
template <typename W>
int64_t NegligibleEnds(const W* w, int64_t k) {
  int64_t n = 0;
  while (2 * n + 1 < k && Negligible(w[n])) ++n;
  return n;
}

// Q15 taps of a symmetric kernel, rounded; the centre takes what rounding
// lost, so that they sum to 32768 (but for a single tap of 1, held as 32767).
void FixedTaps(const float* w, int64_t k, int16_t* q) {
  int32_t sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    q[i] = static_cast<int16_t>(std::min<long>(std::lround(w[i] * 32768.f), 32767));
    sum += q[i];
  }
  q[k / 2] = static_cast<int16_t>(std::clamp<int32_t>(q[k / 2] + 32768 - sum, 0, 32767));
}

}  // namespace

std::vector<int32_t> BorderMap(int64_t n, int64_t r, bool reflect) {
  std::vector<int32_t> map(n + 2 * r);
  for (int64_t i = -r; i < n + r; ++i) {
    map[i + r] = static_cast<int32_t>(BorderIndex(i, n, reflect ? PadMode::kReflect : PadMode::kConstant));
  }
  return map;
}

void GaussianTaps(int64_t k, float sigma, float* taps) {
  const double half = (k - 1) / 2.0;
  // Symmetric: taps i and k-1-i have the same |x|, so the same value; half
  // the exponentials (a per-sample sigma computes them for every image).
  for (int64_t i = 0; i <= (k - 1) / 2; ++i) {
    const double x = (i - half) / sigma;
    taps[i] = taps[k - 1 - i] = static_cast<float>(std::exp(-0.5 * x * x));
  }
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += taps[i];
  for (int64_t i = 0; i < k; ++i) taps[i] = static_cast<float>(taps[i] / sum);
}

void BlurTaps::Compute(int64_t kw_, int64_t kh_, float sigma, bool fixed_point) {
  kw = kw_, kh = kh_;
  w.resize(kw + kh);
  GaussianTaps(kw, sigma, w.data());
  if (kh == kw) {  // one sigma for both axes, as torchvision: the same taps
    std::copy(w.begin(), w.begin() + kw, w.begin() + kw);
  } else {
    GaussianTaps(kh, sigma, w.data() + kw);
  }
  if (!fixed_point) return;
  q.resize(kw + kh);
  FixedTaps(w.data(), kw, q.data());
  FixedTaps(w.data() + kw, kh, q.data() + kw);
}

void BlurTaps::Trim(bool fixed_point) {
  const int64_t sx = fixed_point ? NegligibleEnds(q.data(), kw) : NegligibleEnds(w.data(), kw);
  const int64_t sy = fixed_point ? NegligibleEnds(q.data() + kw, kh) : NegligibleEnds(w.data() + kw, kh);
  auto cut = [&](auto& v) {
    if (v.empty()) return;
    std::remove_reference_t<decltype(v)> kept(v.begin() + sx, v.begin() + kw - sx);
    kept.insert(kept.end(), v.begin() + kw + sy, v.begin() + kw + kh - sy);
    v = std::move(kept);
  };
  cut(w);
  cut(q);
  kw -= 2 * sx, kh -= 2 * sy;
}

// Blurs a uint8 image in fixed point with Q15 taps.
void BlurFixedImage(const uint8_t* src, uint8_t* dst, const FilterShape& f, const int16_t* wx, const int16_t* wy) {
  const ImageDims& d = f.dims;
  Scratch<int16_t>& s = ThreadScratch<int16_t>();
  Prepare<int16_t>(src, f, 0, s);
  const int64_t skip_x = NegligibleEnds(wx, f.kw), skip_y = NegligibleEnds(wy, f.kh);
  if (skip_x > 0) {
    for (int64_t y = 0; y < d.h; ++y) s.in_ptrs[y] += skip_x * d.c;
  }
  ConvolveRows(s.in_ptrs.data(), s.mid_ptrs.data(), d.h, d.row_elems(), d.c, wx + skip_x, f.kw - 2 * skip_x);
  WeightedSumRows(s.window.data() + skip_y, OutputRows(dst, d.h, d.row_elems()), d.h, d.row_elems(), wy + skip_y,
                  f.kh - 2 * skip_y);
}

// Blurs a float image. The horizontal pass writes its rows, in whole
// vectors, into one flat buffer that also holds the rows of the vertical
// borders (copied in after): the vertical pass is then one run of vectors
// over the whole image.
void BlurFloatImage(const float* src, float* dst, const FilterShape& f, const float* wx, const float* wy) {
  const ImageDims& d = f.dims;
  const int64_t n = d.row_elems(), slack = kRowSlackBytes / static_cast<int64_t>(sizeof(float));
  Scratch<float>& s = ThreadScratch<float>();
  const int64_t padded_row = (d.w + f.kw - 1) * d.c + slack;
  float* padded = s.Get(s.padded, d.h * padded_row);
  const std::vector<int32_t>& left = f.borders.left;
  const std::vector<int32_t>& right = f.borders.right;
  PadRows(src, d.h, n, left.data(), static_cast<int64_t>(left.size()), right.data(), static_cast<int64_t>(right.size()),
          padded, padded_row);
  const int64_t skip_x = NegligibleEnds(wx, f.kw), skip_y = NegligibleEnds(wy, f.kh);
  const int64_t kx = f.kw - 2 * skip_x, ky = f.kh - 2 * skip_y, ry = ky / 2;
  float* rows = s.Get(s.rows, (d.h + ky - 1) * n + slack);  // image row y is row ry + y
  ConvolveRows(padded + skip_x * d.c, padded_row, rows + ry * n, n, d.h, n, d.c, wx + skip_x, kx,
               /*exact_end=*/false);
  // f.ymap[t] is the row read at y = t - kh / 2, and kh / 2 = ry + skip_y.
  for (int64_t t = 0; t < ry; ++t) {
    const int64_t below = ry + d.h + t;
    std::copy_n(rows + (ry + f.ymap[skip_y + t]) * n, n, rows + t * n);
    std::copy_n(rows + (ry + f.ymap[skip_y + below]) * n, n, rows + below * n);
  }
  ConvolveRows(rows, 0, dst, 0, 1, d.h * n, n, wy + skip_y, ky, /*exact_end=*/true);
}

// Dilates one image as its own type: the max is exact in any.
template <typename T>
void DilateImage(const T* src, T* dst, const FilterShape& f) {
  const ImageDims& d = f.dims;
  Scratch<T>& s = ThreadScratch<T>();
  // Pixels outside the image never win the max: they hold the lowest value.
  Prepare<T>(src, f, std::numeric_limits<T>::lowest(), s);
  MaxRows(s.in_ptrs.data(), s.mid_ptrs.data(), d.h, d.row_elems(), d.c, f.kw);
  MaxWindowRows(s.window.data(), OutputRows(dst, d.h, d.row_elems()), d.h, d.row_elems(), f.kh);
}

template void DilateImage<uint8_t>(const uint8_t* src, uint8_t* dst, const FilterShape& f);
template void DilateImage<float>(const float* src, float* dst, const FilterShape& f);

}  // namespace sluice::kernels
