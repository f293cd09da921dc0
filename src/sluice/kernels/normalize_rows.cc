// Normalizing rows is compiled once per SIMD target (Highway's
// foreach_target; AVX2 and AVX-512 take the intrinsics paths) and the best
// the CPU has is chosen at run time. Every path gives the same values.
#include "sluice/kernels/normalize_rows.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sluice/kernels/normalize_rows.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

#ifndef SLUICE_KERNELS_NORMALIZE_ONCE_
#define SLUICE_KERNELS_NORMALIZE_ONCE_
namespace sluice::kernels::normalize_internal {

// IEEE half from float, rounding to nearest even (what numpy's astype and
// F16C's vcvtps2ph do), for targets without F16C.
uint16_t HalfFromFloat(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) {  // subnormal or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // a carry into the exponent is right
  return static_cast<uint16_t>(half);
}

}  // namespace sluice::kernels::normalize_internal
#endif  // SLUICE_KERNELS_NORMALIZE_ONCE_

// The intrinsics paths: AVX2 with FMA and F16C, which AVX-512 has too.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define SLUICE_NORMALIZE_AVX2 1
#else
#define SLUICE_NORMALIZE_AVX2 0
#endif

HWY_BEFORE_NAMESPACE();
namespace sluice::kernels {
namespace HWY_NAMESPACE {
namespace {

// Every path computes a * level + b as one fused multiply-add, so the
// scalar tails, the SIMD loops and both inputs give identical values.
float Affine(float a, float level, float b) { return std::fma(a, level, b); }

uint16_t Half(float f) {
#if SLUICE_NORMALIZE_AVX2
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
  return normalize_internal::HalfFromFloat(f);
#endif
}

#if SLUICE_NORMALIZE_AVX2
// Sixteen RGB pixels (48 bytes at p) as sixteen reds, greens and blues
// (int16): each channel gathers its bytes from the three 16-byte thirds.
void DeinterleaveRgb16(const uint8_t* p, __m256i* r, __m256i* g, __m256i* b) {
  const __m128i p0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i p1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
  const __m128i p2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
  auto gather = [&](__m128i m0, __m128i m1, __m128i m2) {
    return _mm256_cvtepu8_epi16(
        _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(p0, m0), _mm_shuffle_epi8(p1, m1)), _mm_shuffle_epi8(p2, m2)));
  };
  constexpr char z = -1;  // pshufb writes 0 where the index has its top bit set
  *r = gather(_mm_setr_epi8(0, 3, 6, 9, 12, 15, z, z, z, z, z, z, z, z, z, z),
              _mm_setr_epi8(z, z, z, z, z, z, 2, 5, 8, 11, 14, z, z, z, z, z),
              _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, z, 1, 4, 7, 10, 13));
  *g = gather(_mm_setr_epi8(1, 4, 7, 10, 13, z, z, z, z, z, z, z, z, z, z, z),
              _mm_setr_epi8(z, z, z, z, z, 0, 3, 6, 9, 12, 15, z, z, z, z, z),
              _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, z, 2, 5, 8, 11, 14));
  *b = gather(_mm_setr_epi8(2, 5, 8, 11, 14, z, z, z, z, z, z, z, z, z, z, z),
              _mm_setr_epi8(z, z, z, z, z, 1, 4, 7, 10, 13, z, z, z, z, z, z),
              _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, 0, 3, 6, 9, 12, 15));
}

// Sixteen int16 in reverse order.
__m256i Reversed(__m256i v) {
  const __m256i in_lanes =
      _mm256_shuffle_epi8(v, _mm256_setr_epi8(14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10,
                                              11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1));
  return _mm256_permute4x64_epi64(in_lanes, 0x4e);
}

// Sixteen levels (int16, 0..255) of one channel, normalized (a * v + b)
// and stored as T.
template <typename T>
void Store16(__m256i levels, __m256 a, __m256 b, T* dst) {
  const __m128i lo_words = _mm256_castsi256_si128(levels), hi_words = _mm256_extracti128_si256(levels, 1);
  if constexpr (std::is_same_v<T, uint8_t>) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_packus_epi16(lo_words, hi_words));
  } else {
    const __m256 lo = _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(lo_words)), b);
    const __m256 hi = _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(hi_words)), b);
    if constexpr (std::is_same_v<T, float>) {
      _mm256_storeu_ps(dst, lo);
      _mm256_storeu_ps(dst + 8, hi);
    } else {
      static_assert(std::is_same_v<T, uint16_t>);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 8), _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT));
    }
  }
}
#endif

// Calls fn(dst as the output dtype, store) with the dtype's conversion
// from a (normalized) float.
template <typename Fn>
void WithOutputType(const NormalizeLayout& l, uint8_t* dst, Fn fn) {
  switch (l.out) {
    case DType::kFloat32:
      fn(reinterpret_cast<float*>(dst), [](float v) { return v; });
      break;
    case DType::kFloat16:
      fn(reinterpret_cast<uint16_t*>(dst), Half);
      break;
    default:
      fn(dst, [](float v) { return static_cast<uint8_t>(v); });
  }
}

// Rows y0 .. y0 + n - 1, row y's values at rows + (y - y0) * stride. The
// set-up is once per call: a 32-pixel row (CIFAR) is only two steps of the
// loop, and called row by row the set-up took a fifth of the time.
template <typename T, typename Store>
void WriteRows(const NormalizeLayout& l, const uint8_t* rows, int64_t stride, int64_t y0, int64_t n, bool mirror,
               T* dst, Store store) {
#if SLUICE_NORMALIZE_AVX2
  const bool rgb_planes = l.chw && l.channels == 3;  // the compiler does not vectorize stride 3
  const __m256 va0 = _mm256_set1_ps(l.a[0]), va1 = _mm256_set1_ps(l.a[rgb_planes ? 1 : 0]),
               va2 = _mm256_set1_ps(l.a[rgb_planes ? 2 : 0]);
  const __m256 vb0 = _mm256_set1_ps(l.b[0]), vb1 = _mm256_set1_ps(l.b[rgb_planes ? 1 : 0]),
               vb2 = _mm256_set1_ps(l.b[rgb_planes ? 2 : 0]);
#endif
  for (int64_t y = y0; y < y0 + n; ++y) {
    const uint8_t* row = rows + (y - y0) * stride;
    int64_t x0 = 0;
#if SLUICE_NORMALIZE_AVX2
    if (rgb_planes) {  // sixteen pixels a step
      T* d0 = dst + l.Offset(0, y, 0);
      T* d1 = dst + l.Offset(1, y, 0);
      T* d2 = dst + l.Offset(2, y, 0);
      for (; x0 + 16 <= l.w; x0 += 16) {
        __m256i r, g, bl;
        DeinterleaveRgb16(row + (mirror ? l.w - 16 - x0 : x0) * 3, &r, &g, &bl);
        if (mirror) r = Reversed(r), g = Reversed(g), bl = Reversed(bl);
        Store16(r, va0, vb0, d0 + x0);
        Store16(g, va1, vb1, d1 + x0);
        Store16(bl, va2, vb2, d2 + x0);
      }
    }
#endif
    for (int64_t x = x0; x < l.w; ++x) {
      const uint8_t* p = row + (mirror ? l.w - 1 - x : x) * l.channels;
      for (int64_t c = 0; c < l.channels; ++c) dst[l.Offset(c, y, x)] = store(Affine(l.a[c], p[c], l.b[c]));
    }
  }
}

template <typename T, typename Store>
void WritePlanes(const NormalizeLayout& l, const int16_t* levels, int64_t channel_stride, int64_t y, bool mirror,
                 T* dst, Store store) {
  for (int64_t c = 0; c < l.channels; ++c) {
    const int16_t* in = levels + c * channel_stride;
    int64_t x0 = 0;
#if SLUICE_NORMALIZE_AVX2
    if (l.chw) {
      const __m256 va = _mm256_set1_ps(l.a[c]), vb = _mm256_set1_ps(l.b[c]);
      T* d = dst + l.Offset(c, y, 0);
      for (; x0 + 16 <= l.w; x0 += 16) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + (mirror ? l.w - 16 - x0 : x0)));
        Store16(mirror ? Reversed(v) : v, va, vb, d + x0);
      }
    }
#endif
    for (int64_t x = x0; x < l.w; ++x) {
      dst[l.Offset(c, y, x)] = store(Affine(l.a[c], in[mirror ? l.w - 1 - x : x], l.b[c]));
    }
  }
}

}  // namespace

void NormalizeRowsImpl(const NormalizeLayout& l, const uint8_t* rows, int64_t stride, int64_t y0, int64_t n,
                       bool mirror, uint8_t* dst) {
  WithOutputType(l, dst, [&](auto* out, auto store) { WriteRows(l, rows, stride, y0, n, mirror, out, store); });
}

void NormalizePlanesImpl(const NormalizeLayout& l, const int16_t* levels, int64_t channel_stride, int64_t y,
                         bool mirror, uint8_t* dst) {
  WithOutputType(l, dst, [&](auto* out, auto store) { WritePlanes(l, levels, channel_stride, y, mirror, out, store); });
}

}  // namespace HWY_NAMESPACE
}  // namespace sluice::kernels
HWY_AFTER_NAMESPACE();

#undef SLUICE_NORMALIZE_AVX2

#if HWY_ONCE
namespace sluice::kernels {

HWY_EXPORT(NormalizeRowsImpl);
HWY_EXPORT(NormalizePlanesImpl);

void NormalizeRow(const NormalizeLayout& layout, const uint8_t* row, int64_t y, bool mirror, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(NormalizeRowsImpl)(layout, row, 0, y, 1, mirror, dst);
}

void NormalizeRows(const NormalizeLayout& layout, const uint8_t* rows, int64_t stride, int64_t y0, int64_t n,
                   bool mirror, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(NormalizeRowsImpl)(layout, rows, stride, y0, n, mirror, dst);
}

void NormalizePlanes(const NormalizeLayout& layout, const int16_t* levels, int64_t channel_stride, int64_t y,
                     bool mirror, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(NormalizePlanesImpl)(layout, levels, channel_stride, y, mirror, dst);
}

}  // namespace sluice::kernels
#endif  // HWY_ONCE
