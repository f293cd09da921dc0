#include "sluice/ops/normalize.h"

#include <cstring>

#include <type_traits>

#if defined(__F16C__) || defined(__SSE4_1__)
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/crop_window.h"

namespace sluice::ops {
namespace {

// IEEE half from float, rounding to nearest even (what numpy's astype does).
uint16_t HalfFromFloat(float f) {
#if defined(__F16C__)
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
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
#endif
}

#if defined(__SSE4_1__)
// Four RGB pixels (12 floats at p) as four reds, greens and blues.
void DeinterleaveRgb4(const float* p, __m128* r, __m128* g, __m128* b) {
  const __m128 a = _mm_loadu_ps(p), m = _mm_loadu_ps(p + 4), c = _mm_loadu_ps(p + 8);
  // a = r0 g0 b0 r1, m = g1 b1 r2 g2, c = b2 r3 g3 b3
  const __m128 t0 = _mm_shuffle_ps(a, m, _MM_SHUFFLE(0, 1, 3, 0));  // r0 r1 b1 g1
  const __m128 t1 = _mm_shuffle_ps(m, c, _MM_SHUFFLE(1, 0, 3, 2));  // r2 g2 b2 r3
  const __m128 t2 = _mm_shuffle_ps(a, c, _MM_SHUFFLE(3, 2, 2, 1));  // g0 b0 g3 b3
  *r = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 0, 1, 0));
  *g = _mm_shuffle_ps(_mm_shuffle_ps(t2, t0, _MM_SHUFFLE(3, 3, 0, 0)), _mm_shuffle_ps(t1, t2, _MM_SHUFFLE(2, 2, 1, 1)),
                      _MM_SHUFFLE(2, 0, 2, 0));
  *b = _mm_shuffle_ps(_mm_shuffle_ps(t2, t0, _MM_SHUFFLE(2, 2, 1, 1)), _mm_shuffle_ps(t1, t2, _MM_SHUFFLE(3, 3, 2, 2)),
                      _MM_SHUFFLE(2, 0, 2, 0));
}

__m128 Reversed(__m128 v) { return _mm_shuffle_ps(v, v, _MM_SHUFFLE(0, 1, 2, 3)); }

template <typename T>
void Store4(T* dst, __m128 v) {
  if constexpr (std::is_same_v<T, float>) {
    _mm_storeu_ps(dst, v);
  } else {
    static_assert(std::is_same_v<T, uint16_t>);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
}
#endif

}  // namespace

Normalizer::Normalizer(int64_t h, int64_t w, int64_t channels, DType out, bool chw, float mirror_p,
                       std::vector<float> a, std::vector<float> b)
    : h_(h), w_(w), channels_(channels), out_(out), chw_(chw), mirror_p_(mirror_p), a_(std::move(a)),
      b_(std::move(b)) {}

bool Normalizer::Mirror(const TileContext& ctx, int64_t r, uint64_t key) const {
  if (!random()) return mirror_p_ >= 1;
  SampleRng rng = ctx.RngFor(key, r);
  return rng.Bernoulli(mirror_p_);
}

void Normalizer::Row(const uint8_t* row, int64_t y, bool mirror, uint8_t* dst) const { RowOf(row, y, mirror, dst); }
void Normalizer::Row(const float* row, int64_t y, bool mirror, uint8_t* dst) const { RowOf(row, y, mirror, dst); }

template <typename In>
void Normalizer::RowOf(const In* row, int64_t y, bool mirror, uint8_t* dst) const {
  switch (out_) {
    case DType::kFloat32:
      Write(row, y, mirror, reinterpret_cast<float*>(dst), [](float v) { return v; });
      break;
    case DType::kFloat16:
      Write(row, y, mirror, reinterpret_cast<uint16_t*>(dst), HalfFromFloat);
      break;
    default:
      Write(row, y, mirror, dst, [](float v) { return static_cast<uint8_t>(v); });
  }
}

template <typename In, typename T, typename Store>
void Normalizer::Write(const In* row, int64_t y, bool mirror, T* dst, Store store) const {
  const int64_t channels = channels_, plane = h_ * w_;
  const bool normalize = out_ != DType::kUInt8;
  if (chw_ && channels == 3) {  // one pass per row into three planes (vectorizes)
    T* d0 = dst + y * w_;
    T* d1 = d0 + plane;
    T* d2 = d1 + plane;
    const float a0 = normalize ? a_[0] : 1, a1 = normalize ? a_[1] : 1, a2 = normalize ? a_[2] : 1;
    const float b0 = normalize ? b_[0] : 0, b1 = normalize ? b_[1] : 0, b2 = normalize ? b_[2] : 0;
    int64_t x0 = 0;
#if defined(__SSE4_1__) && defined(__F16C__) && defined(__FMA__)
    // Rows of floats (a decode resampling straight into this) deinterleave
    // four pixels at a time; the compiler does not vectorize stride 3.
    if constexpr (std::is_same_v<In, float> && (std::is_same_v<T, float> || std::is_same_v<T, uint16_t>)) {
      const __m128 va0 = _mm_set1_ps(a0), va1 = _mm_set1_ps(a1), va2 = _mm_set1_ps(a2);
      const __m128 vb0 = _mm_set1_ps(b0), vb1 = _mm_set1_ps(b1), vb2 = _mm_set1_ps(b2);
      for (; x0 + 4 <= w_; x0 += 4) {
        __m128 r, g, b;
        if (mirror) {
          DeinterleaveRgb4(row + (w_ - 4 - x0) * 3, &r, &g, &b);
          r = Reversed(r), g = Reversed(g), b = Reversed(b);
        } else {
          DeinterleaveRgb4(row + x0 * 3, &r, &g, &b);
        }
        Store4(d0 + x0, _mm_fmadd_ps(va0, r, vb0));
        Store4(d1 + x0, _mm_fmadd_ps(va1, g, vb1));
        Store4(d2 + x0, _mm_fmadd_ps(va2, b, vb2));
      }
    }
#endif
    if (mirror) {
      const In* p = row + (w_ - 1) * 3;
      for (int64_t x = x0; x < w_; ++x) {
        d0[x] = store(a0 * p[-3 * x] + b0);
        d1[x] = store(a1 * p[-3 * x + 1] + b1);
        d2[x] = store(a2 * p[-3 * x + 2] + b2);
      }
    } else {
      for (int64_t x = x0; x < w_; ++x) {
        d0[x] = store(a0 * row[3 * x] + b0);
        d1[x] = store(a1 * row[3 * x + 1] + b1);
        d2[x] = store(a2 * row[3 * x + 2] + b2);
      }
    }
    return;
  }
  for (int64_t x = 0; x < w_; ++x) {
    const In* p = row + (mirror ? w_ - 1 - x : x) * channels;
    for (int64_t c = 0; c < channels; ++c) {
      const float v = normalize ? a_[c] * p[c] + b_[c] : p[c];
      dst[chw_ ? c * plane + y * w_ + x : (y * w_ + x) * channels + c] = store(v);
    }
  }
}

absl::Status CropMirrorNormalizeKernel::Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                                            absl::Span<const ColumnRef> out) const {
  const auto [top, left] = CenterOffsets(in_, h_, w_);
  for (int64_t r = 0; r < ctx.rows; ++r) {
    const bool mirror = normalizer_.Mirror(ctx, r, ctx.op_key);
    const uint8_t* src = in[0].row<uint8_t>(r) + (top * in_.w + left) * in_.c;
    uint8_t* dst = out[0].data + r * out[0].row_bytes;
    for (int64_t y = 0; y < h_; ++y) normalizer_.Row(src + y * in_.row_elems(), y, mirror, dst);
  }
  return absl::OkStatus();
}

absl::StatusOr<OpBinding> BindCropMirrorNormalize(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, BindUint8Image(attrs, schema, &f));
  std::pair<int64_t, int64_t> crop{d.h, d.w};
  if (!attrs.GetInts("crop").empty()) {
    SLUICE_ASSIGN_OR_RETURN(crop, ImageSizeAttr(attrs, "crop"));
    if (crop.first > d.h || crop.second > d.w) return AttrError("crop", "is larger than the image");
  }
  absl::StatusOr<DType> dtype = ParseDType(attrs.GetString("dtype"));
  if (!dtype.ok() || (*dtype != DType::kFloat32 && *dtype != DType::kFloat16 && *dtype != DType::kUInt8)) {
    return AttrError("dtype", "must be \"float32\", \"float16\" or \"uint8\" (not normalized: for the GPU)");
  }
  const std::string& layout = attrs.GetString("layout");
  if (layout != "CHW" && layout != "HWC") return AttrError("layout", "must be \"CHW\" or \"HWC\"");
  const double mirror = attrs.GetFloat("mirror");
  if (mirror < 0 || mirror > 1) return AttrError("mirror", "is a probability: 0, 1, or in between");
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
    if (!(s > 0)) return AttrError("std", "must be > 0");
    const double m = mean.size() == 1 ? mean[0] : mean[i];
    a[i] = static_cast<float>(scale / s);
    b[i] = static_cast<float>(-m / s);
  }
  ColumnSpec out = f.spec;
  out.dtype = *dtype;
  out.shape = layout == "CHW" ? Shape{d.c, crop.first, crop.second} : Shape{crop.first, crop.second, d.c};
  OpBinding binding = UnaryBinding(
      f.column, out,
      std::make_shared<CropMirrorNormalizeKernel>(
          d, crop.first, crop.second,
          Normalizer(crop.first, crop.second, d.c, *dtype, layout == "CHW", static_cast<float>(mirror),
                     std::move(a), std::move(b))));
  binding.random = mirror > 0 && mirror < 1;
  return binding;
}


}  // namespace sluice::ops
