// The resampling loops are compiled once per SIMD target (Highway's
// foreach_target) and the best the CPU has is chosen at run time.
#include "sluice/kernels/warp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sluice/kernels/warp.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "sluice/kernels/border.h"
#include "sluice/kernels/image_adjust.h"
#include "sluice/kernels/value_loops.h"

HWY_BEFORE_NAMESPACE();
namespace sluice::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

// Keras' fill modes as padding modes: its reflect is dcba|abcd.
inline PadMode PadModeOf(FillMode mode) {
  switch (mode) {
    case FillMode::kConstant:
      return PadMode::kConstant;
    case FillMode::kNearest:
      return PadMode::kEdge;
    case FillMode::kReflect:
      break;
  }
  return PadMode::kSymmetric;
}

// What a warp writes: its value as the output type, after the rescale a
// warp of uint8 into float folds in (scale 1 and offset 0 otherwise, which
// change no value).
template <typename Out>
Out Output(const WarpSpec& spec, float v) {
  return StoreAs<Out>(spec.rescaled ? v * spec.scale + spec.offset : v);
}

// The constant fill in the units of the input (a rescaled warp interpolates
// uint8 values and rescales after).
float FillInInputUnits(const WarpSpec& spec) {
  return spec.rescaled ? (spec.fill_value - spec.offset) / spec.scale : spec.fill_value;
}

// A coordinate clamped to +-1e6 (NaN to -1e6): far outside any image, and
// safe to convert to an integer.
inline float ClampCoordinate(float v) { return v > -1e6f ? (v < 1e6f ? v : 1e6f) : -1e6f; }

template <typename In, typename Out, int kC>
void Warp(const WarpSpec& spec, const Affine& a, const In* src, Out* dst) {
  const int64_t w = spec.dims.w, h = spec.dims.h;
  const int64_t c = kC > 0 ? kC : spec.dims.c;
  const int64_t stride = w * c;
  // Where output channel ch of a pixel goes: out[ch * channel_step].
  const int64_t channel_step = spec.chw_out ? w * h : 1;
  const int64_t pixel_step = spec.chw_out ? 1 : c;
  const float fill = FillInInputUnits(spec);
  const float* m = a.m;
  const bool projective = a.projective();
  for (int64_t y = 0; y < h; ++y) {
    const float bx = m[1] * y + m[2], by = m[4] * y + m[5], bw = a.p[1] * y + a.p[2];
    Out* out = dst + y * w * pixel_step;
    for (int64_t x = 0; x < w; ++x, out += pixel_step) {
      float fx = m[0] * x + bx, fy = m[3] * x + by;
      if (projective) {
        const float wx = a.p[0] * x + bw;
        fx /= wx, fy /= wx;
      }
      // Far (or undefined: a rotation by 1e39 degrees) coordinates clamped
      // before the int conversion.
      fx = ClampCoordinate(fx), fy = ClampCoordinate(fy);
      const float flx = std::floor(fx), fly = std::floor(fy);
      const float ax = fx - flx, ay = fy - fly;
      const int64_t x0 = static_cast<int64_t>(flx), y0 = static_cast<int64_t>(fly);
      if (x0 >= 0 && y0 >= 0 && x0 + 1 < w && y0 + 1 < h) {  // interior: no border logic
        const In* p = src + y0 * stride + x0 * c;
        for (int64_t ch = 0; ch < c; ++ch) {
          const float top = p[ch] + ax * (static_cast<float>(p[ch + c]) - p[ch]);
          const float bottom = p[ch + stride] + ax * (static_cast<float>(p[ch + stride + c]) - p[ch + stride]);
          out[ch * channel_step] = Output<Out>(spec, top + ay * (bottom - top));
        }
        continue;
      }
      const PadMode border = PadModeOf(spec.fill_mode);
      const int64_t xi[2] = {BorderIndex(x0, w, border), BorderIndex(x0 + 1, w, border)};
      const int64_t yi[2] = {BorderIndex(y0, h, border), BorderIndex(y0 + 1, h, border)};
      for (int64_t ch = 0; ch < c; ++ch) {
        auto at = [&](int j, int i) -> float {
          if (xi[i] < 0 || yi[j] < 0) return fill;
          return src[yi[j] * stride + xi[i] * c + ch];
        };
        const float top = at(0, 0) + ax * (at(0, 1) - at(0, 0));
        const float bottom = at(1, 0) + ax * (at(1, 1) - at(1, 0));
        out[ch * channel_step] = Output<Out>(spec, top + ay * (bottom - top));
      }
    }
  }
}

// The 32-bit word at src + offset, a lane per offset. AVX2's gather is
// microcoded on AMD's Zen 1-3 and slowed on Intel's by the Gather Data
// Sampling fix: on the Zen 3 of bench/RESULTS.md eight loads and inserts
// take 3.4 ns where vpgatherdd takes 5.8 ns. AVX-512's gather (0.37 ns a
// lane on the Zen 4 there) stays.
template <class DU, class VI>
hn::Vec<DU> LoadWords([[maybe_unused]] DU du, const uint8_t* src, VI offset) {
#if HWY_TARGET == HWY_AVX2
  alignas(32) int32_t at[8];
  hn::Store(offset, hn::RebindToSigned<DU>(), at);
  uint32_t word[8];
  for (int i = 0; i < 8; ++i) std::memcpy(&word[i], src + at[i], 4);
  __m128i lo = _mm_cvtsi32_si128(static_cast<int>(word[0])), hi = _mm_cvtsi32_si128(static_cast<int>(word[4]));
  lo = _mm_insert_epi32(_mm_insert_epi32(_mm_insert_epi32(lo, word[1], 1), word[2], 2), word[3], 3);
  hi = _mm_insert_epi32(_mm_insert_epi32(_mm_insert_epi32(hi, word[5], 1), word[6], 2), word[7], 3);
  return hn::Vec<DU>{_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1)};
#else
  return hn::GatherOffset(du, reinterpret_cast<const uint32_t*>(src), offset);
#endif
}

#if HWY_TARGET == HWY_AVX2
// The byte shuffles of RowPairs::Byte(): within each 128-bit half, the byte
// of the half's first qword into dword 0 (of a) or 2 (of b), of its second
// into dword 1 or 3; -128 zeroes the rest.
struct PairMasks {
  alignas(32) int8_t a[6][32];
  alignas(32) int8_t b[6][32];
};
constexpr PairMasks MakePairMasks() {
  PairMasks m{};
  for (int byte = 0; byte < 6; ++byte) {
    for (int i = 0; i < 32; ++i) m.a[byte][i] = m.b[byte][i] = -128;
    for (int half = 0; half < 32; half += 16) {
      m.a[byte][half] = m.b[byte][half + 8] = static_cast<int8_t>(byte);
      m.a[byte][half + 4] = m.b[byte][half + 12] = static_cast<int8_t>(8 + byte);
    }
  }
  return m;
}
constexpr PairMasks kPairMasks = MakePairMasks();

// Both horizontal taps of 8 pixels on one source row, from one 8-byte load
// a pixel (its C <= 3 channels, then its right neighbour's): half the loads
// of a word a tap. Pixels 0, 1, 4, 5 are in `a` and 2, 3, 6, 7 in `b`, so
// that a byte shuffle of each, or-ed, lists them in order.
struct RowPairs {
  __m256i a, b;
  RowPairs(const uint8_t* row, const int32_t* at) {
    auto pair = [&](int i) {
      int64_t v;
      std::memcpy(&v, row + at[i], 8);
      return v;
    };
    auto two = [&](int i) { return _mm_insert_epi64(_mm_cvtsi64_si128(pair(i)), pair(i + 1), 1); };
    a = _mm256_inserti128_si256(_mm256_castsi128_si256(two(0)), two(4), 1);
    b = _mm256_inserti128_si256(_mm256_castsi128_si256(two(2)), two(6), 1);
  }
  // Byte `byte` (< 6) of each pixel's 8, as float.
  hn::Vec256<float> Byte(int byte) const {
    const __m256i ma = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPairMasks.a[byte]));
    const __m256i mb = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPairMasks.b[byte]));
    const __m256i bytes = _mm256_or_si256(_mm256_shuffle_epi8(a, ma), _mm256_shuffle_epi8(b, mb));
    return hn::Vec256<float>{_mm256_cvtepi32_ps(bytes)};
  }
};
#endif

// The warp into float, a vector of output pixels per step: coordinates,
// border mapping and the four bilinear taps are vectors, the taps are
// gathers. Border pixels take the same path as interior ones, so rotations
// (whose corners sample outside the image) stay vectorized. Same
// arithmetic as Warp<In, float, C>.
//
// Float input gathers each tap's channels one by one: 4 x C gathers a
// vector. uint8 input (a rescaled warp) gathers a tap's C <= 3 channels at
// once as one 32-bit word, 4 gathers a vector: gathers bound this loop
// (a 16-lane gather every ~6 ns on the AMD EPYC of bench/RESULTS.md), and
// W2's warp took 3.2 us an image this way against 5.3 us gathering floats.
// On AVX2, a vector of pixels whose taps are all inside the image loads
// each source row's two taps with one 8-byte load (RowPairs).
template <int kC, typename In>
class SimdWarp {
 public:
  using D = hn::ScalableTag<float>;
  using DI = hn::RebindToSigned<D>;
  using DU = hn::RebindToUnsigned<D>;
  using VF = hn::Vec<D>;
  using VI = hn::Vec<DI>;
  using MI = hn::Mask<DI>;

  // The spec and map are copied: stores through `dst` could otherwise alias
  // them, and the loop would reload them after every store.
  SimdWarp(const WarpSpec& spec, const Affine& a, const In* src, float* dst)
      : spec_(spec),
        a_(a),
        src_(src),
        dst_(dst),
        w_(static_cast<int32_t>(spec.dims.w)),
        h_(static_cast<int32_t>(spec.dims.h)),
        lanes_(static_cast<int64_t>(hn::Lanes(d_))),
        constant_(spec.fill_mode == FillMode::kConstant),
        reflect_(spec.fill_mode == FillMode::kReflect),
        projective_(a.projective()),
        fill_(hn::Set(d_, FillInInputUnits(spec))),
        scale_(hn::Set(d_, spec.scale)),
        offset_(hn::Set(d_, spec.offset)) {}

  void Run() {
    // The last vector of a row goes out through here (a local: the object
    // holding the loop's constants must not be written through a pointer).
    alignas(64) float tail[3 * 64];
    for (int32_t y = 0; y < h_; ++y) {
      const RowBase row{hn::Set(d_, a_.m[1] * y + a_.m[2]), hn::Set(d_, a_.m[4] * y + a_.m[5]),
                        hn::Set(d_, a_.p[1] * y + a_.p[2])};
      for (int32_t x0 = 0; x0 < w_; x0 += static_cast<int32_t>(lanes_)) Vector(y, x0, row, tail);
    }
#if HWY_ARCH_X86
    if (stream_) _mm_sfence();  // the streamed stores are seen before the sample is handed on
#endif
  }

 private:
  // Where a vector's four taps are (element offsets: 00, 01, 10, 11), the
  // horizontal and vertical fractions, and which taps lie inside the image.
  // Each row's taps as a pair of adjacent pixels too, where they are one:
  // `pair` (top, bottom) is the pair's left pixel, and `right` (for taps
  // x0 and x1) where a tap is the pair's right one. Not so near a constant
  // border, whose taps outside are no pixel.
  struct Taps {
    VI o[4];
    MI inside[4];
    VF ax, ay;
    bool interior;  // every lane's four taps inside: no border mapping
    bool paired;
    VI pair[2];
    MI right[2];
  };

  // What a row's vectors share: the map's terms in y.
  struct RowBase {
    VF bx, by, bw;
  };

  // The output pixels x0.. of row y: a vector of them.
  HWY_INLINE void Vector(int32_t y, int32_t x0, const RowBase& row, float* tail) const {
    const Taps t = TapsOf(x0, row);
    VF out[kC];
    if (!InterpolateRowPairs(t, out)) InterpolateGathered(t, out);
    Store(y, x0, out, tail);
  }

  HWY_INLINE Taps TapsOf(int32_t x0, const RowBase& row) const {
    const float* m = a_.m;
    const VF xs = hn::Iota(d_, static_cast<float>(x0));
    VF fx = hn::MulAdd(hn::Set(d_, m[0]), xs, row.bx);
    VF fy = hn::MulAdd(hn::Set(d_, m[3]), xs, row.by);
    if (projective_) {  // the same for every vector of a map: predicted, nothing for affine maps
      const VF wx = hn::MulAdd(hn::Set(d_, a_.p[0]), xs, row.bw);
      fx = hn::Div(fx, wx), fy = hn::Div(fy, wx);
    }
    // Far-away coordinates are clamped before the int conversion.
    const VF lo = hn::Set(d_, -1e6f), hi = hn::Set(d_, 1e6f);
    fx = hn::Min(hn::Max(fx, lo), hi);
    fy = hn::Min(hn::Max(fy, lo), hi);
    const VF flx = hn::Floor(fx), fly = hn::Floor(fy);
    Taps t;
    t.ax = hn::Sub(fx, flx), t.ay = hn::Sub(fy, fly);
    const VI ix = hn::ConvertTo(di_, flx), iy = hn::ConvertTo(di_, fly);
    const VI stride = hn::Set(di_, w_ * kC), c = hn::Set(di_, kC);
    // Most of a rotation's pixels: the offsets follow from the first.
    t.interior = hn::AllTrue(di_, hn::And(hn::And(hn::Gt(ix, hn::Set(di_, -1)), hn::Lt(ix, hn::Set(di_, w_ - 1))),
                                          hn::And(hn::Gt(iy, hn::Set(di_, -1)), hn::Lt(iy, hn::Set(di_, h_ - 1)))));
    if (t.interior) {
      t.o[0] = hn::Add(hn::Mul(iy, stride), hn::Mul(ix, c));
      t.o[1] = hn::Add(t.o[0], c);
      t.o[2] = hn::Add(t.o[0], stride);
      t.o[3] = hn::Add(t.o[2], c);
      for (MI& in : t.inside) in = hn::FirstN(di_, lanes_);
      t.pair[0] = t.o[0], t.pair[1] = t.o[2];
      t.right[0] = hn::FirstN(di_, 0), t.right[1] = hn::FirstN(di_, lanes_);
      t.paired = kPairedTaps && PairsEndInside(t);
      return t;
    }
    // Only a constant fill asks which taps are inside.
    MI in_x0, in_x1, in_y0, in_y1;
    const VI one = hn::Set(di_, 1);
    const VI x0i = MapAxis(ix, w_, &in_x0), x1i = MapAxis(hn::Add(ix, one), w_, &in_x1);
    const VI y0i = MapAxis(iy, h_, &in_y0), y1i = MapAxis(hn::Add(iy, one), h_, &in_y1);
    const VI row0 = hn::Mul(y0i, stride), row1 = hn::Mul(y1i, stride);
    // Nearest and reflect map neighbours to neighbours or to one pixel:
    // the pair starting at the lesser, kept within the row.
    if (kPairedTaps && !constant_ && w_ > 1) {
      const VI left = hn::Min(hn::Min(x0i, x1i), hn::Set(di_, w_ - 2));
      const VI col = hn::Mul(left, c);
      t.pair[0] = hn::Add(row0, col), t.pair[1] = hn::Add(row1, col);
      t.right[0] = hn::Gt(x0i, left), t.right[1] = hn::Gt(x1i, left);
      t.paired = PairsEndInside(t);
      if (t.paired) return t;
    }
    t.paired = false;
    const VI col0 = hn::Mul(x0i, c), col1 = hn::Mul(x1i, c);
    t.o[0] = hn::Add(row0, col0), t.o[1] = hn::Add(row0, col1);
    t.o[2] = hn::Add(row1, col0), t.o[3] = hn::Add(row1, col1);
    if (constant_) {
      t.inside[0] = hn::And(in_y0, in_x0), t.inside[1] = hn::And(in_y0, in_x1);
      t.inside[2] = hn::And(in_y1, in_x0), t.inside[3] = hn::And(in_y1, in_x1);
    }
    return t;
  }

  // Whether each pair's 8 bytes end inside the image.
  HWY_INLINE bool PairsEndInside(const Taps& t) const {
    const VI end = hn::Set(di_, h_ * w_ * kC - 7);  // the first offset whose 8 bytes end past the image
    return hn::AllTrue(di_, hn::And(hn::Lt(t.pair[0], end), hn::Lt(t.pair[1], end)));
  }

  // Index of coordinate i on an axis of n, and (for a constant fill)
  // whether it is inside.
  HWY_INLINE VI MapAxis(VI i, int32_t n, MI* inside) const {
    if (constant_) *inside = hn::And(hn::Gt(i, hn::Set(di_, -1)), hn::Lt(i, hn::Set(di_, n)));
    if (!reflect_) return hn::Min(hn::Max(i, hn::Zero(di_)), hn::Set(di_, n - 1));
    // Period 2n: fedcba|abcdef|fedcba.
    const VI period = hn::Set(di_, 2 * n);
    // Within one reflection of the image (a rotation's corners) no period
    // to take off: i past the end comes back as 2n - 1 - i, before the
    // start as -1 - i.
    if (hn::AllTrue(di_, hn::And(hn::Gt(i, hn::Set(di_, -n - 1)), hn::Lt(i, period)))) {
      const VI r = hn::Min(i, hn::Sub(hn::Set(di_, 2 * n - 1), i));
      return hn::Max(r, hn::Sub(hn::Set(di_, -1), r));
    }
    const VF q = hn::Floor(hn::Div(hn::ConvertTo(d_, i), hn::ConvertTo(d_, period)));
    VI r = hn::Sub(i, hn::Mul(hn::ConvertTo(di_, q), period));
    r = hn::IfThenElse(hn::Lt(r, hn::Zero(di_)), hn::Sub(hn::Set(di_, -1), r), r);
    r = hn::IfThenElse(hn::Gt(r, hn::Set(di_, n - 1)), hn::Sub(hn::Set(di_, 2 * n - 1), r), r);
    return hn::Min(hn::Max(r, hn::Zero(di_)), hn::Set(di_, n - 1));
  }

  HWY_INLINE VF Bilinear(const Taps& t, VF v00, VF v01, VF v10, VF v11) const {
    const VF top = hn::MulAdd(t.ax, hn::Sub(v01, v00), v00);
    const VF bottom = hn::MulAdd(t.ax, hn::Sub(v11, v10), v10);
    const VF v = hn::MulAdd(t.ay, hn::Sub(bottom, top), top);
    return rescaled_ ? hn::MulAdd(v, scale_, offset_) : v;
  }

  // On AVX2, paired uint8 taps (all inside the image, or mapped onto
  // pairs by a nearest or reflect border): each source row's two taps with
  // one 8-byte load (RowPairs), a tap on the pair's right pixel where
  // `right` says so. False where this path does not apply. (Border
  // vectors took 32 word loads and shifts the other way.)
  HWY_INLINE bool InterpolateRowPairs([[maybe_unused]] const Taps& t, [[maybe_unused]] VF* out) const {
#if HWY_TARGET == HWY_AVX2
    if constexpr (kPairedTaps) {
      if (!t.paired) return false;
      alignas(32) int32_t at[2][8];
      hn::Store(t.pair[0], di_, at[0]);
      hn::Store(t.pair[1], di_, at[1]);
      const auto* bytes = reinterpret_cast<const uint8_t*>(src_);
      const RowPairs top(bytes, at[0]), bottom(bytes, at[1]);
      for (int ch = 0; ch < kC; ++ch) {
        const VF top_left = top.Byte(ch), top_right = top.Byte(kC + ch);
        const VF bottom_left = bottom.Byte(ch), bottom_right = bottom.Byte(kC + ch);
        if (t.interior) {
          out[ch] = Bilinear(t, top_left, top_right, bottom_left, bottom_right);
          continue;
        }
        const auto right0 = hn::RebindMask(d_, t.right[0]), right1 = hn::RebindMask(d_, t.right[1]);
        out[ch] = Bilinear(t, hn::IfThenElse(right0, top_right, top_left), hn::IfThenElse(right1, top_right, top_left),
                           hn::IfThenElse(right0, bottom_right, bottom_left),
                           hn::IfThenElse(right1, bottom_right, bottom_left));
      }
      return true;
    }
#endif
    return false;
  }

  // Channel ch of tap t: a gather of floats, or a byte of the tap's word. A
  // channel at a time keeps the live vectors within AVX2's 16 registers
  // (all twelve taps at once spilled them).
  HWY_INLINE void InterpolateGathered(const Taps& t, VF* out) const {
    hn::Vec<DU> words[4];
    if constexpr (!std::is_same_v<In, float>) {
      if (!PairWords(t, words)) {
        for (int k = 0; k < 4; ++k) words[k] = PixelWord(t.o[k]);
      }
    }
    for (int ch = 0; ch < kC; ++ch) {
      VF v[4];
      for (int k = 0; k < 4; ++k) {
        if constexpr (std::is_same_v<In, float>) {
          v[k] = hn::GatherIndex(d_, src_ + ch, t.o[k]);
        } else {
          const auto byte = hn::And(hn::ShiftRightSame(words[k], 8 * ch), hn::Set(du_, 0xff));
          v[k] = hn::ConvertTo(d_, hn::BitCast(di_, byte));
        }
        if (constant_) v[k] = hn::IfThenElse(hn::RebindMask(d_, t.inside[k]), v[k], fill_);
      }
      out[ch] = Bilinear(t, v[0], v[1], v[2], v[3]);
    }
  }

  // On AVX-512, the four taps' words of paired taps: each row's pair of
  // pixels gathered as one 8-byte word, half the lanes of gathering a
  // word a tap. Gathers bound this loop on the Xeon of bench/RESULTS.md
  // (2026-12-05), where this (with MapAxis' two-op reflection) made W2's
  // warp 1.16x faster. False where the taps are not paired.
  HWY_INLINE bool PairWords([[maybe_unused]] const Taps& t, [[maybe_unused]] hn::Vec<DU>* words) const {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    if constexpr (kPairedTaps) {
      if (!t.paired) return false;
      for (int row = 0; row < 2; ++row) {
        const __m512i at = t.pair[row].raw;
        const __m512i lo = _mm512_i32gather_epi64(_mm512_castsi512_si256(at), src_, 1);
        const __m512i hi = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(at, 1), src_, 1);
        // Each lane's word: the low half of its pixel pair's 8 bytes, from
        // the left pixel or, shifted, the right one.
        const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512i left = _mm512_permutex2var_epi32(lo, even, hi);
        const __m512i right =
            _mm512_permutex2var_epi32(_mm512_srli_epi64(lo, 8 * kC), even, _mm512_srli_epi64(hi, 8 * kC));
        for (int k = 0; k < 2; ++k) {
          words[2 * row + k] = hn::Vec<DU>{_mm512_mask_blend_epi32(t.right[k].raw, left, right)};
        }
      }
      return true;
    }
#endif
    return false;
  }

  // A uint8 pixel's channels as one word, channel ch in bits 8ch..8ch+7: the
  // 4 bytes read end inside the image (the last pixels read from earlier
  // and shift).
  HWY_INLINE hn::Vec<DU> PixelWord(VI offset) const {
    const VI at = hn::Min(offset, hn::Set(di_, h_ * w_ * kC - 4));
    const auto word = LoadWords(du_, reinterpret_cast<const uint8_t*>(src_), at);
    return word >> hn::BitCast(du_, hn::ShiftLeft<3>(hn::Sub(offset, at)));
  }

  // The vector's pixels into the output: planes (one store per plane) or
  // interleaved; the last vector of a row through `tail`.
  HWY_INLINE void Store(int32_t y, int32_t x0, const VF* out, float* tail) const {
    const int64_t count = std::min<int64_t>(lanes_, w_ - x0);
    const int64_t pixel = static_cast<int64_t>(y) * w_ + x0;
    if (chw_out_ && kC > 1) {
      const int64_t plane = static_cast<int64_t>(w_) * h_;
      for (int ch = 0; ch < kC; ++ch) {
        float* p = dst_ + ch * plane + pixel;
        if (count == lanes_) {
          StoreWhole(out[ch], p);
        } else {
          hn::StoreU(out[ch], d_, tail);
          std::memcpy(p, tail, count * sizeof(float));
        }
      }
      return;
    }
    float* p = dst_ + pixel * kC;
    float* target = count == lanes_ ? p : tail;
    if constexpr (kC == 1) {
      if (target == p) {
        StoreWhole(out[0], p);
      } else {
        hn::StoreU(out[0], d_, tail);
      }
    } else {
      hn::StoreInterleaved3(out[0], out[1], out[2], d_, target);
    }
    if (target == tail) std::memcpy(p, tail, count * kC * sizeof(float));
  }

  // A whole vector of the output at `p`: past the caches when streaming and
  // p is aligned to the vector (rows of whole vectors in an aligned batch).
  HWY_INLINE void StoreWhole(VF v, float* p) const {
    if (stream_ && reinterpret_cast<uintptr_t>(p) % (lanes_ * sizeof(float)) == 0) {
      hn::Stream(v, d_, p);
    } else {
      hn::StoreU(v, d_, p);
    }
  }

  // AVX2 and AVX-512 (whose targets number below AVX2's) load or gather row pairs.
  static constexpr bool kPairedTaps = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !std::is_same_v<In, float> && kC <= 3;

  const D d_;
  const DI di_;
  const DU du_;
  const WarpSpec spec_;
  const Affine a_;
  const In* src_;
  float* dst_;
  const int32_t w_, h_;
  const int64_t lanes_;
  const bool constant_, reflect_, projective_;
  const bool rescaled_ = spec_.rescaled, chw_out_ = spec_.chw_out, stream_ = spec_.stream;
  const VF fill_, scale_, offset_;
};

template <int kC, typename In>
void WarpSimd(const WarpSpec& spec, const Affine& a, const In* src, float* dst) {
  SimdWarp<kC, In>(spec, a, src, dst).Run();
}

template <typename T>
void WarpTyped(const WarpSpec& spec, const Affine& a, const T* src, T* dst) {
  if constexpr (std::is_same_v<T, float>) {
    if (spec.dims.c == 1) return WarpSimd<1>(spec, a, src, dst);
    if (spec.dims.c == 3) return WarpSimd<3>(spec, a, src, dst);
  }
  // Fixed channel counts let the compiler unroll the channel loop.
  switch (spec.dims.c) {
    case 1:
      return Warp<T, T, 1>(spec, a, src, dst);
    case 3:
      return Warp<T, T, 3>(spec, a, src, dst);
    default:
      return Warp<T, T, 0>(spec, a, src, dst);
  }
}

// uint8 in, float out, rescaled: one word a tap where the image holds at
// least one word.
void WarpRescaled(const WarpSpec& spec, const Affine& a, const uint8_t* src, float* dst) {
  const bool words = spec.dims.h * spec.dims.w * spec.dims.c >= 4;
  if (words && spec.dims.c == 1) return WarpSimd<1>(spec, a, src, dst);
  if (words && spec.dims.c == 3) return WarpSimd<3>(spec, a, src, dst);
  Warp<uint8_t, float, 0>(spec, a, src, dst);
}

}  // namespace

// Bytes of the float vectors SimdWarp stores.
size_t WarpVectorBytesImpl() { return hn::Lanes(hn::ScalableTag<float>()) * sizeof(float); }

void WarpAffineImpl(const WarpSpec& spec, const Affine& map, const uint8_t* src, uint8_t* dst) {
  if (spec.rescaled) return WarpRescaled(spec, map, src, reinterpret_cast<float*>(dst));
  if (spec.dtype == DType::kUInt8) return WarpTyped<uint8_t>(spec, map, src, dst);
  WarpTyped<float>(spec, map, reinterpret_cast<const float*>(src), reinterpret_cast<float*>(dst));
}

}  // namespace HWY_NAMESPACE
}  // namespace sluice::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sluice::kernels {
HWY_EXPORT(WarpAffineImpl);
HWY_EXPORT(WarpVectorBytesImpl);

void WarpAffine(const WarpSpec& spec, const Affine& map, const uint8_t* src, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(WarpAffineImpl)(spec, map, src, dst);
}

// The 3x3 product first * second of two maps, one of them projective.
Affine ThenProjective(const Affine& first, const Affine& second) {
  const float f[3][3] = {
      {first.m[0], first.m[1], first.m[2]}, {first.m[3], first.m[4], first.m[5]}, {first.p[0], first.p[1], first.p[2]}};
  const float s[3][3] = {{second.m[0], second.m[1], second.m[2]},
                         {second.m[3], second.m[4], second.m[5]},
                         {second.p[0], second.p[1], second.p[2]}};
  float r[3][3];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) r[i][j] = f[i][0] * s[0][j] + f[i][1] * s[1][j] + f[i][2] * s[2][j];
  }
  Affine out;
  for (int j = 0; j < 3; ++j) out.m[j] = r[0][j], out.m[3 + j] = r[1][j], out.p[j] = r[2][j];
  return out;
}

WarpBypass WarpBypassFor(const WarpSpec& spec) {
  const bool simd = spec.rescaled || spec.dtype == DType::kFloat32;  // SimdWarp's inputs
  if (!simd || !(spec.dims.c == 1 || (spec.dims.c == 3 && spec.chw_out))) return WarpBypass::kScratch;
  // AVX2's vector is half a line, and the three planes' halves are
  // interleaved: streamed, W2 ran at 135k samples/s on the Zen 3 against
  // 174k from scratch and 185k plainly.
  return HWY_DYNAMIC_DISPATCH(WarpVectorBytesImpl)() >= 64 ? WarpBypass::kItself : WarpBypass::kPlain;
}

Affine Then(const Affine& first, const Affine& second) {
  // first(second(p)): substitute second's output into first.
  if (first.projective() || second.projective()) return ThenProjective(first, second);
  const float* a = first.m;
  const float* b = second.m;
  Affine r;
  r.m[0] = a[0] * b[0] + a[1] * b[3];
  r.m[1] = a[0] * b[1] + a[1] * b[4];
  r.m[2] = a[0] * b[2] + a[1] * b[5] + a[2];
  r.m[3] = a[3] * b[0] + a[4] * b[3];
  r.m[4] = a[3] * b[1] + a[4] * b[4];
  r.m[5] = a[3] * b[2] + a[4] * b[5] + a[5];
  return r;
}

Affine PerspectiveMap(const int corners[8], const ImageDims& dims) {
  // _get_perspective_coeffs: the 8 coefficients taking each moved corner
  // (x, y) to its original (X, Y): X = (c0 x + c1 y + c2) / (c6 x + c7 y + 1),
  // Y likewise with c3..c5; solved by Gaussian elimination with pivoting.
  const double w1 = static_cast<double>(dims.w - 1), h1 = static_cast<double>(dims.h - 1);
  const double start[8] = {0, 0, w1, 0, w1, h1, 0, h1};
  double a[8][9];
  for (int i = 0; i < 4; ++i) {
    const double x = corners[2 * i], y = corners[2 * i + 1], X = start[2 * i], Y = start[2 * i + 1];
    const double rx[9] = {x, y, 1, 0, 0, 0, -X * x, -X * y, X};
    const double ry[9] = {0, 0, 0, x, y, 1, -Y * x, -Y * y, Y};
    std::copy(rx, rx + 9, a[2 * i]);
    std::copy(ry, ry + 9, a[2 * i + 1]);
  }
  for (int col = 0; col < 8; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 8; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    std::swap(a[col], a[pivot]);
    if (a[col][col] == 0) return Affine();  // corners on a line: no homography, no change
    for (int r = 0; r < 8; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int k = col; k < 9; ++k) a[r][k] -= f * a[col][k];
    }
  }
  double c[8];
  for (int i = 0; i < 8; ++i) c[i] = a[i][8] / a[i][i];
  // torchvision samples at pixel centres x + 1/2 (PIL's convention) and
  // grid_sample reads back at u - 1/2: M = T(-1/2) H T(1/2) in this file's
  // pixels, T(t) a shift by t on both axes.
  const double h[3][3] = {{c[0], c[1], c[2]}, {c[3], c[4], c[5]}, {c[6], c[7], 1}};
  double m[3][3];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      const double right = j < 2 ? h[i][j] : 0.5 * h[i][0] + 0.5 * h[i][1] + h[i][2];  // H T(1/2)
      m[i][j] = right;
    }
  }
  for (int j = 0; j < 3; ++j) {  // T(-1/2) on the left: rows 0 and 1 lose half of row 2
    m[0][j] -= 0.5 * m[2][j];
    m[1][j] -= 0.5 * m[2][j];
  }
  Affine out;
  for (int j = 0; j < 3; ++j) {
    out.m[j] = static_cast<float>(m[0][j]);
    out.m[3 + j] = static_cast<float>(m[1][j]);
    out.p[j] = static_cast<float>(m[2][j]);
  }
  return out;
}

Affine FromCentred(const double centred[6], const ImageDims& dims) {
  const double cx = (dims.w - 1) / 2.0, cy = (dims.h - 1) / 2.0;
  const double* m = centred;
  Affine a;
  a.m[0] = static_cast<float>(m[0]);
  a.m[1] = static_cast<float>(m[1]);
  a.m[2] = static_cast<float>(m[2] + cx - m[0] * cx - m[1] * cy);
  a.m[3] = static_cast<float>(m[3]);
  a.m[4] = static_cast<float>(m[4]);
  a.m[5] = static_cast<float>(m[5] + cy - m[3] * cx - m[4] * cy);
  return a;
}

}  // namespace sluice::kernels
#endif  // HWY_ONCE
