// Normalizing rows is compiled once per SIMD target (Highway's
// foreach_target; AVX2 and AVX-512 take the intrinsics paths) and the best
// the CPU has is chosen at run time. Every path gives the same values.
#include "sluice/ops/normalize.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sluice/ops/normalize.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/crop_window.h"

#ifndef SLUICE_OPS_NORMALIZE_ONCE_
#define SLUICE_OPS_NORMALIZE_ONCE_
namespace sluice::ops::normalize_internal {

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

}  // namespace sluice::ops::normalize_internal
#endif  // SLUICE_OPS_NORMALIZE_ONCE_

// The intrinsics paths: AVX2 with FMA and F16C, which AVX-512 has too.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define SLUICE_NORMALIZE_AVX2 1
#else
#define SLUICE_NORMALIZE_AVX2 0
#endif

HWY_BEFORE_NAMESPACE();
namespace sluice::ops {
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
  const __m256i in_lanes = _mm256_shuffle_epi8(
      v, _mm256_setr_epi8(14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4,
                          5, 2, 3, 0, 1));
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

template <typename T, typename Store>
void WriteRow(const NormalizeLayout& l, const uint8_t* row, int64_t y, bool mirror, T* dst, Store store) {
  int64_t x0 = 0;
#if SLUICE_NORMALIZE_AVX2
  if (l.chw && l.channels == 3) {  // the compiler does not vectorize stride 3: sixteen pixels a step
    T* d0 = dst + l.Offset(0, y, 0);
    T* d1 = dst + l.Offset(1, y, 0);
    T* d2 = dst + l.Offset(2, y, 0);
    const __m256 va0 = _mm256_set1_ps(l.a[0]), va1 = _mm256_set1_ps(l.a[1]), va2 = _mm256_set1_ps(l.a[2]);
    const __m256 vb0 = _mm256_set1_ps(l.b[0]), vb1 = _mm256_set1_ps(l.b[1]), vb2 = _mm256_set1_ps(l.b[2]);
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

void NormalizeRowImpl(const NormalizeLayout& l, const uint8_t* row, int64_t y, bool mirror, uint8_t* dst) {
  WithOutputType(l, dst, [&](auto* out, auto store) { WriteRow(l, row, y, mirror, out, store); });
}

void NormalizePlanesImpl(const NormalizeLayout& l, const int16_t* levels, int64_t channel_stride, int64_t y,
                         bool mirror, uint8_t* dst) {
  WithOutputType(l, dst, [&](auto* out, auto store) { WritePlanes(l, levels, channel_stride, y, mirror, out, store); });
}

}  // namespace HWY_NAMESPACE
}  // namespace sluice::ops
HWY_AFTER_NAMESPACE();

#undef SLUICE_NORMALIZE_AVX2

#if HWY_ONCE
namespace sluice::ops {

HWY_EXPORT(NormalizeRowImpl);
HWY_EXPORT(NormalizePlanesImpl);

Normalizer::Normalizer(int64_t h, int64_t w, int64_t channels, DType out, bool chw, float mirror_p,
                       std::vector<float> a, std::vector<float> b)
    : layout_{h, w, channels, out, chw,
              // uint8 output keeps the levels: 1 * level + 0, exactly.
              out == DType::kUInt8 ? std::vector<float>(static_cast<size_t>(channels), 1.f) : std::move(a),
              out == DType::kUInt8 ? std::vector<float>(static_cast<size_t>(channels), 0.f) : std::move(b)},
      mirror_p_(mirror_p) {}


bool Normalizer::Mirror(const KernelContext& ctx, int64_t r, uint64_t key) const {
  if (!random()) return mirror_p_ >= 1;
  SampleRng rng = ctx.RngFor(key, r);
  return rng.Bernoulli(mirror_p_);
}

void Normalizer::Row(const uint8_t* row, int64_t y, bool mirror, uint8_t* dst) const {
  HWY_DYNAMIC_DISPATCH(NormalizeRowImpl)(layout_, row, y, mirror, dst);
}

void Normalizer::Planes(const int16_t* levels, int64_t channel_stride, int64_t y, bool mirror, uint8_t* dst) const {
  HWY_DYNAMIC_DISPATCH(NormalizePlanesImpl)(layout_, levels, channel_stride, y, mirror, dst);
}

namespace {

class CropMirrorNormalizeKernel : public Kernel {
 public:
  using Params = CropMirrorNormalizeParams;
  explicit CropMirrorNormalizeKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const ImageDims& d = p_.in;
    const auto [top, left] = CenterOffsets(d, p_.h, p_.w);
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const bool mirror = p_.normalizer.Mirror(ctx, r, ctx.op_key);
      const uint8_t* src = in[0].row<uint8_t>(r) + (top * d.w + left) * d.c;
      uint8_t* dst = out[0].data + r * out[0].row_bytes;
      for (int64_t y = 0; y < p_.h; ++y) p_.normalizer.Row(src + y * d.row_elems(), y, mirror, dst);
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

absl::StatusOr<InferredOp> InferCropMirrorNormalize(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, BindUint8Image(attrs, schema, &f));
  std::pair<int64_t, int64_t> crop{d.h, d.w};
  if (!attrs.GetInts("crop").empty()) {
    crop = ImageSize(attrs, "crop");
    if (crop.first > d.h || crop.second > d.w) return AttrError("crop", "is larger than the image");
  }
  const absl::StatusOr<DType> dtype = ParseDType(attrs.GetString("dtype"));  // one of the attr's choices
  const std::string& layout = attrs.GetString("layout");
  const double mirror = attrs.GetFloat("mirror");
  const std::vector<double>& mean = attrs.GetFloats("mean");
  const std::vector<double>& std_dev = attrs.GetFloats("std");
  const size_t c = static_cast<size_t>(d.c);
  if ((mean.size() != 1 && mean.size() != c) || (std_dev.size() != 1 && std_dev.size() != c)) {
    return AttrError("mean", absl::StrCat("mean and std need one value or one per channel (", c, ")"));
  }
  std::vector<float> a(c), b(c);
  const double scale = attrs.GetFloat("scale");
  for (size_t i = 0; i < c; ++i) {
    const double s = std_dev.size() == 1 ? std_dev[0] : std_dev[i];
    const double m = mean.size() == 1 ? mean[0] : mean[i];
    a[i] = static_cast<float>(scale / s);
    b[i] = static_cast<float>(-m / s);
  }
  ColumnSpec out = f.spec;
  out.dtype = *dtype;
  out.shape = layout == "CHW" ? Shape{d.c, crop.first, crop.second} : Shape{crop.first, crop.second, d.c};
  InferredOp op = UnaryOp(f.column, out,
                          CropMirrorNormalizeParams{d, crop.first, crop.second,
                                                    Normalizer(crop.first, crop.second, d.c, *dtype, layout == "CHW",
                                                               static_cast<float>(mirror), std::move(a), std::move(b))});
  op.random = mirror > 0 && mirror < 1;
  return op;
}

}  // namespace

absl::Status RegisterCropMirrorNormalize(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("crop_mirror_normalize")
          .Doc("The last step before a model, fused: an optional centre crop, a mirror with probability `mirror`, "
               "normalization (in * scale - mean) / std per channel, and HWC uint8 to CHW float32 or float16; "
               "dtype uint8 skips the normalization (do it on the GPU: a quarter of the bytes across PCIe).")
          .Attr(FieldAttr())
          .Attr(AttrSchema{"crop", AttrType::kInts, "[]", "[height, width] or [size] of a centre crop; empty: none"}
                    .Count(0, 2)
                    .Range(1, 65535))
          .Attr(AttrSchema{"mirror", AttrType::kFloat, "0.5", "probability of a horizontal mirror"}.Range(0, 1))
          .Attr({"mean", AttrType::kFloats, "[0.485, 0.456, 0.406]", "per channel, after scaling (ImageNet's)"})
          .Attr(AttrSchema{"std", AttrType::kFloats, "[0.229, 0.224, 0.225]", "per channel (ImageNet's)"}.Above(0))
          .Attr({"scale", AttrType::kFloat, "0.00392156862745098", "applied first (1/255: torchvision's ToTensor)"})
          .Attr(AttrSchema{"dtype", AttrType::kString, "\"float32\"", "the output's dtype (uint8: not normalized)"}
                    .OneOf({"float32", "float16", "uint8"}))
          .Attr(AttrSchema{"layout", AttrType::kString, "\"CHW\"", "CHW (PyTorch's) or HWC"}.OneOf({"CHW", "HWC"}))
          .Input("field", "uint8 image [H,W,C]")
          .Output("field", "[C,h,w] or [h,w,C] of dtype")
          .Random()
          .Infer(InferCropMirrorNormalize)));
  return registry->AddKernel<CropMirrorNormalizeKernel>("crop_mirror_normalize", Backend::kCpu);
}

}  // namespace sluice::ops
#endif  // HWY_ONCE
