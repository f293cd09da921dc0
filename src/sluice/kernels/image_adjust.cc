#include "sluice/kernels/image_adjust.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "sluice/kernels/luma.h"

namespace sluice::kernels {
namespace {

// Python's math.radians: x times pi / 180 (one rounding of the constant).
constexpr double kRadiansPerDegree = 3.14159265358979323846 / 180.0;

// _blend of a level with `other`: ratio x + (1 - ratio) other in float32,
// clamped to [0, 255] and truncated.
inline uint8_t Blend(float ratio, float rest, uint8_t x, float other) {
  const float a = ratio * static_cast<float>(x);
  const float b = rest * other;
  return static_cast<uint8_t>(std::clamp(a + b, 0.f, 255.f));
}

// The two factors of _blend: ratio as float32, and 1 - ratio taken in double first.
struct BlendFactors {
  float ratio, rest;
  explicit BlendFactors(double r) : ratio(static_cast<float>(r)), rest(static_cast<float>(1.0 - r)) {}
};

// Every level blended with the same `other`: a table.
Lut BlendLut(double factor, float other) {
  const BlendFactors f(factor);
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = Blend(f.ratio, f.rest, static_cast<uint8_t>(v), other);
  return lut;
}

// F.autocontrast: (x - min) * (255 / (max - min)) in float32, truncated; a
// flat channel stays as it is. torch divides a number by a tensor as the
// tensor's reciprocal times the number, rounding twice: so does this.
Lut AutocontrastLut(const uint32_t* hist) {
  int lo = 0, hi = 255;
  while (lo < 255 && hist[lo] == 0) ++lo;
  while (hi > 0 && hist[hi] == 0) --hi;
  Lut lut;
  const float scale = hi > lo ? (1.0f / static_cast<float>(hi - lo)) * 255.0f : 1.0f;
  const float min = hi > lo ? static_cast<float>(lo) : 0.0f;
  for (int v = 0; v < 256; ++v) {
    lut[v] = static_cast<uint8_t>(std::clamp((static_cast<float>(v) - min) * scale, 0.0f, 255.0f));
  }
  return lut;
}

// F.equalize's _scale_channel: step = (pixels not of the highest level
// present) / 255; level v maps to (pixels below v + step / 2) / step.
Lut EqualizeLut(const uint32_t* hist) {
  Lut lut;
  int64_t total = 0, last = 0;
  for (int v = 0; v < 256; ++v) {
    total += hist[v];
    if (hist[v] != 0) last = hist[v];
  }
  const int64_t step = (total - last) / 255;
  if (step == 0) {
    for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v);
    return lut;
  }
  int64_t below = 0;
  for (int v = 0; v < 256; ++v) {
    lut[v] = static_cast<uint8_t>(std::min<int64_t>((below + step / 2) / step, 255));
    below += hist[v];
  }
  lut[0] = 0;
  return lut;
}

// Rounding to nearest, ties to even, as std::nearbyint (a library call,
// which keeps a loop from vectorizing): adding and taking away 1.5 x 2^23
// leaves no fraction bits, so the FPU rounds. Exact for |v| < 2^22.
constexpr float kRoundEvenLimit = 4194304.0f;
inline float RoundEven(float v) {
  constexpr float kShift = 12582912.0f;
  return (v + kShift) - kShift;
}

template <typename F>
Lut TableOf(F f) {
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(f(v));
  return lut;
}

}  // namespace

Lut InvertLut() {
  return TableOf([](int v) { return 255 - v; });
}

Lut PosterizeLut(int bits) {
  const int mask = -(1 << (8 - bits));  // F.posterize: the low 8 - bits bits cleared
  return TableOf([mask](int v) { return v & mask; });
}

Lut SolarizeLut(double threshold) {
  // A uint8 tensor meets a Python number in float32.
  const float t = static_cast<float>(threshold);
  return TableOf([t](int v) { return static_cast<float>(v) >= t ? 255 - v : v; });
}

void ApplyLut(const Lut& lut, int64_t n, const uint8_t* src, uint8_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = lut[src[i]];
}

void StretchChannels(ChannelStretch kind, const ImageDims& d, const uint8_t* src, uint8_t* dst) {
  const int64_t pixels = d.h * d.w, c = d.c;
  thread_local std::vector<std::array<uint32_t, 256>> hists;  // per thread, grown once
  thread_local std::vector<Lut> luts;
  hists.assign(c, {});
  luts.resize(c);
  for (int64_t i = 0; i < pixels; ++i) {  // one pass, every channel
    for (int64_t ch = 0; ch < c; ++ch) ++hists[ch][src[i * c + ch]];
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    luts[ch] = kind == ChannelStretch::kEqualize ? EqualizeLut(hists[ch].data()) : AutocontrastLut(hists[ch].data());
  }
  for (int64_t i = 0; i < pixels * c; i += c) {
    for (int64_t ch = 0; ch < c; ++ch) dst[i + ch] = luts[ch][src[i + ch]];
  }
}

void AdjustBrightness(double factor, const ImageDims& d, uint8_t* img) {
  ApplyLut(BlendLut(factor, 0.f), d.elems(), img, img);
}

void AdjustContrast(double factor, const ImageDims& d, uint8_t* img) {
  const Luma& luma = TorchLuma();
  const int64_t pixels = d.h * d.w;
  int64_t sum = 0;  // exact; torch's float32 sum is too while it stays below 2^24
  for (int64_t i = 0; i < pixels; ++i) sum += d.c == 3 ? luma(img + 3 * i) : img[i * d.c];
  const float mean = static_cast<float>(sum) / static_cast<float>(pixels);
  ApplyLut(BlendLut(factor, mean), d.elems(), img, img);
}

void AdjustSaturation(double factor, const ImageDims& d, uint8_t* img) {
  if (d.c != 3) return;
  const Luma& luma = TorchLuma();
  const BlendFactors f(factor);
  for (int64_t i = 0; i < d.h * d.w; ++i) {
    uint8_t* px = img + 3 * i;
    const float gray = luma(px);
    for (int ch = 0; ch < 3; ++ch) px[ch] = Blend(f.ratio, f.rest, px[ch], gray);
  }
}

// To [0, 1] floats, _rgb2hsv, h shifted modulo 1, _hsv2rgb, times 255 truncated.
void AdjustHue(double factor, const ImageDims& d, uint8_t* img) {
  if (d.c != 3) return;
  const float shift = static_cast<float>(factor);
  for (int64_t i = 0; i < d.h * d.w; ++i) {
    uint8_t* px = img + 3 * i;
    const float r = px[0] / 255.0f, g = px[1] / 255.0f, b = px[2] / 255.0f;
    const float maxc = std::max({r, g, b}), minc = std::min({r, g, b});
    const bool eqc = maxc == minc;
    const float cr = maxc - minc;
    const float s = cr / (eqc ? 1.0f : maxc);
    const float divisor = eqc ? 1.0f : cr;
    const float rc = (maxc - r) / divisor, gc = (maxc - g) / divisor, bc = (maxc - b) / divisor;
    float h;
    if (maxc == r) {
      h = bc - gc;
    } else if (maxc == g) {
      h = (2.0f + rc) - bc;
    } else {
      h = (4.0f + gc) - rc;
    }
    h = std::fmod(h / 6.0f + 1.0f, 1.0f);
    h = h + shift;
    h = h - std::floor(h);  // torch's remainder by 1
    const float v = maxc;
    const float h6 = h * 6.0f;
    const float fi = std::floor(h6);
    const float f = h6 - fi;
    const float p = std::clamp(v * (1.0f - s), 0.0f, 1.0f);
    const float q = std::clamp(v * (1.0f - s * f), 0.0f, 1.0f);
    const float t = std::clamp(v * (1.0f - s * (1.0f - f)), 0.0f, 1.0f);
    float out[3];
    switch (((static_cast<int>(fi) % 6) + 6) % 6) {
      case 0:
        out[0] = v, out[1] = t, out[2] = p;
        break;
      case 1:
        out[0] = q, out[1] = v, out[2] = p;
        break;
      case 2:
        out[0] = p, out[1] = v, out[2] = t;
        break;
      case 3:
        out[0] = p, out[1] = q, out[2] = v;
        break;
      case 4:
        out[0] = t, out[1] = p, out[2] = v;
        break;
      default:
        out[0] = v, out[1] = p, out[2] = q;
    }
    for (int ch = 0; ch < 3; ++ch) px[ch] = static_cast<uint8_t>(out[ch] * 255.0f);
  }
}

void AdjustSharpness(double factor, const ImageDims& d, const uint8_t* src, uint8_t* dst) {
  if (d.h <= 2 || d.w <= 2) {
    std::memmove(dst, src, d.elems());
    return;
  }
  const int64_t stride = d.w * d.c, c = d.c;
  const BlendFactors f(factor);
  // The border rows and columns are blended with themselves.
  auto keep = [&](int64_t from, int64_t to) {
    for (int64_t i = from; i < to; ++i) dst[i] = Blend(f.ratio, f.rest, src[i], src[i]);
  };
  keep(0, stride);
  for (int64_t y = 1; y + 1 < d.h; ++y) {
    const uint8_t* up = src + (y - 1) * stride;
    const uint8_t* mid = src + y * stride;
    const uint8_t* down = src + (y + 1) * stride;
    uint8_t* out = dst + y * stride;
    keep(y * stride, y * stride + c);
    // torch rounds the float32 convolution to a level; the exact value,
    // (8 neighbours + 5 centre) / 13, is never within 1/26 of a tie, so
    // the integer rounding below gives the same level, and vectorizes.
    for (int64_t i = c; i < stride - c; ++i) {
      const int sum = up[i - c] + up[i] + up[i + c] + mid[i - c] + mid[i + c] + down[i - c] + down[i] + down[i + c];
      const int blurred = (2 * (sum + 5 * mid[i]) + 13) / 26;
      out[i] = Blend(f.ratio, f.rest, mid[i], static_cast<float>(blurred));
    }
    keep(y * stride + stride - c, (y + 1) * stride);
  }
  keep((d.h - 1) * stride, d.h * stride);
}

void AffineNearest(const ImageDims& d, const double inverse[6], const uint8_t* fill, const uint8_t* src, uint8_t* dst) {
  // _gen_affine_grid: theta (float32) over [w / 2, h / 2] maps the centred
  // output pixel to [-1, 1]; grid_sample's unnormalize, (g + 1) w / 2 - 1/2,
  // and its rounding then pick the input pixel.
  const float half_w = 0.5f * static_cast<float>(d.w), half_h = 0.5f * static_cast<float>(d.h);
  float t[6];
  for (int k = 0; k < 6; ++k) t[k] = static_cast<float>(inverse[k]) / (k < 3 ? half_w : half_h);
  // RoundEven is exact where the map keeps the image's corners (so every
  // pixel: the map is linear) within its limit; a far-flung map rounds
  // with std::nearbyint.
  bool near = true;
  for (const double cx : {-half_w + 0.5, half_w - 0.5}) {
    for (const double cy : {-half_h + 0.5, half_h - 0.5}) {
      near &= std::abs((cx * t[0] + cy * t[1] + t[2] + 1) * half_w) < kRoundEvenLimit / 2 &&
              std::abs((cx * t[3] + cy * t[4] + t[5] + 1) * half_h) < kRoundEvenLimit / 2;
    }
  }
  const int32_t w = static_cast<int32_t>(d.w), h = static_cast<int32_t>(d.h);
  const int64_t c = d.c;
  thread_local std::vector<int32_t> row_from;  // a row's source pixels (-1: outside), grown once
  row_from.resize(d.w);
  int32_t* from = row_from.data();
  for (int32_t y = 0; y < h; ++y) {
    // The source pixels first, in a loop the compiler vectorizes (int32
    // counters, integer compares and masks: no branch); the copies after.
    const float gy_base = -half_h + 0.5f + static_cast<float>(y);
    auto source = [&](int32_t x, auto round) {
      const float gx_base = -half_w + 0.5f + static_cast<float>(x);
      const float gx = (gx_base * t[0] + gy_base * t[1]) + t[2];
      const float gy = (gx_base * t[3] + gy_base * t[4]) + t[5];
      const int32_t ix = static_cast<int32_t>(round((gx + 1.f) * half_w - 0.5f));
      const int32_t iy = static_cast<int32_t>(round((gy + 1.f) * half_h - 0.5f));
      const int32_t outside = static_cast<int32_t>(static_cast<uint32_t>(ix) >= static_cast<uint32_t>(w)) |
                              static_cast<int32_t>(static_cast<uint32_t>(iy) >= static_cast<uint32_t>(h));
      return (iy * w + ix) | -outside;
    };
    if (near) {
      for (int32_t x = 0; x < w; ++x) from[x] = source(x, RoundEven);
    } else {
      for (int32_t x = 0; x < w; ++x) {
        from[x] = source(x, [](float v) { return std::clamp(std::nearbyint(v), -kRoundEvenLimit, kRoundEvenLimit); });
      }
    }
    uint8_t* out = dst + static_cast<int64_t>(y) * w * c;
    auto copy = [&](auto channels) {
      constexpr int64_t kC = decltype(channels)::value;
      for (int32_t x = 0; x < w; ++x) {
        std::memcpy(out + x * kC, from[x] < 0 ? fill : src + static_cast<int64_t>(from[x]) * kC, kC);
      }
    };
    if (c == 3) {
      copy(std::integral_constant<int64_t, 3>());
    } else if (c == 1) {
      copy(std::integral_constant<int64_t, 1>());
    } else {
      for (int32_t x = 0; x < w; ++x) std::memcpy(out + x * c, from[x] < 0 ? fill : src + from[x] * c, c);
    }
  }
}

void InverseAffineMatrix(const AffineArgs& a, double m[6]) {
  const double rot = a.angle * kRadiansPerDegree;
  const double sx = a.shear_x * kRadiansPerDegree, sy = a.shear_y * kRadiansPerDegree;
  // Rotation, then shear, without the scale: det 1.
  const double ra = std::cos(rot - sy) / std::cos(sy);
  const double rb = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double rc = std::sin(rot - sy) / std::cos(sy);
  const double rd = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  m[0] = rd / a.scale, m[1] = -rb / a.scale, m[2] = 0;
  m[3] = -rc / a.scale, m[4] = ra / a.scale, m[5] = 0;
  m[2] += m[0] * (-a.center_x - a.translate_x) + m[1] * (-a.center_y - a.translate_y) + a.center_x;
  m[5] += m[3] * (-a.center_x - a.translate_x) + m[4] * (-a.center_y - a.translate_y) + a.center_y;
}

}  // namespace sluice::kernels
