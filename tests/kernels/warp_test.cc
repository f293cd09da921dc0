// The warp kernel on its own: exact where bilinear interpolation is exact
// (the identity, whole-pixel shifts), planes equal to the transposed
// interleaved output, the uint8 rescaled path equal to the float warp of
// the rescaled image, and a rotation against OpenCV's warpAffine (which
// quantizes weights to 1/32 pixel: within 1.0 on a smooth image).
#include "sluice/kernels/warp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "opencv2/imgproc.hpp"
#include "sluice/kernels/simd.h"

namespace sluice::kernels {
namespace {

constexpr int kH = 13, kW = 21, kC = 3;

std::vector<float> Smooth() {
  std::vector<float> v(kH * kW * kC);
  for (int y = 0; y < kH; ++y)
    for (int x = 0; x < kW; ++x)
      for (int c = 0; c < kC; ++c) v[(y * kW + x) * kC + c] = 128 + 100 * std::sin(0.3f * x + c) * std::cos(0.2f * y);
  return v;
}

WarpSpec Spec(DType dtype, FillMode mode) { return WarpSpec{dtype, ImageDims{kH, kW, kC}, mode, 5.f}; }

std::vector<float> Warp(const WarpSpec& spec, const Affine& map, const std::vector<float>& src) {
  std::vector<float> dst(src.size());
  WarpAffine(spec, map, reinterpret_cast<const uint8_t*>(src.data()), reinterpret_cast<uint8_t*>(dst.data()));
  return dst;
}

TEST(WarpAffine, TheIdentityCopiesTheImage) {
  const std::vector<float> src = Smooth();
  EXPECT_EQ(Warp(Spec(DType::kFloat32, FillMode::kReflect), Affine(), src), src);
}

TEST(WarpAffine, AWholePixelShiftMovesPixelsAndFillsTheBorder) {
  const std::vector<float> src = Smooth();
  Affine shift;
  shift.m[2] = 2;   // output x reads input x + 2
  shift.m[5] = -1;  // output y reads input y - 1
  const std::vector<float> out = Warp(Spec(DType::kFloat32, FillMode::kConstant), shift, src);
  for (int y = 0; y < kH; ++y)
    for (int x = 0; x < kW; ++x)
      for (int c = 0; c < kC; ++c) {
        const int sx = x + 2, sy = y - 1;
        const bool inside = sx < kW && sy >= 0;
        EXPECT_EQ(out[(y * kW + x) * kC + c], inside ? src[(sy * kW + sx) * kC + c] : 5.f) << y << "," << x;
      }
}

Affine Rotation(double degrees) {
  const double t = degrees * M_PI / 180, c = std::cos(t), s = std::sin(t);
  const double cx = (kW - 1) / 2.0, cy = (kH - 1) / 2.0;
  Affine a;
  a.m[0] = static_cast<float>(c), a.m[1] = static_cast<float>(-s), a.m[2] = static_cast<float>(cx - c * cx + s * cy);
  a.m[3] = static_cast<float>(s), a.m[4] = static_cast<float>(c), a.m[5] = static_cast<float>(cy - s * cx - c * cy);
  return a;
}

TEST(WarpAffine, PlanesAreTheTransposedPixels) {
  const std::vector<float> src = Smooth();
  WarpSpec spec = Spec(DType::kFloat32, FillMode::kReflect);
  const std::vector<float> hwc = Warp(spec, Rotation(17), src);
  spec.chw_out = true;
  const std::vector<float> chw = Warp(spec, Rotation(17), src);
  for (int c = 0; c < kC; ++c)
    for (int p = 0; p < kH * kW; ++p) ASSERT_EQ(chw[c * kH * kW + p], hwc[p * kC + c]);
}

TEST(WarpAffine, TheRescaledUint8PathEqualsTheFloatWarpOfTheRescaledImage) {
  const std::vector<float> smooth = Smooth();
  std::vector<uint8_t> u8(smooth.size());
  std::vector<float> rescaled(smooth.size());
  for (size_t i = 0; i < smooth.size(); ++i) {
    u8[i] = static_cast<uint8_t>(smooth[i]);
    rescaled[i] = u8[i] / 255.f - 0.5f;
  }
  for (FillMode mode : {FillMode::kReflect, FillMode::kNearest, FillMode::kConstant}) {
    WarpSpec spec = Spec(DType::kUInt8, mode);
    spec.rescaled = true, spec.scale = 1 / 255.f, spec.offset = -0.5f, spec.fill_value = 0.25f;
    std::vector<float> from_u8(u8.size());
    WarpAffine(spec, Rotation(-29), u8.data(), reinterpret_cast<uint8_t*>(from_u8.data()));
    WarpSpec float_spec = Spec(DType::kFloat32, mode);
    float_spec.fill_value = 0.25f;
    const std::vector<float> want = Warp(float_spec, Rotation(-29), rescaled);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(from_u8[i], want[i], 1e-5) << i;
  }
}

TEST(WarpAffine, ARotationMatchesOpenCv) {
  const std::vector<float> src = Smooth();
  const Affine a = Rotation(36);
  const std::vector<float> out = Warp(Spec(DType::kFloat32, FillMode::kReflect), a, src);
  cv::Mat in(kH, kW, CV_32FC3, const_cast<float*>(src.data())), ref;
  const cv::Mat map = (cv::Mat_<double>(2, 3) << a.m[0], a.m[1], a.m[2], a.m[3], a.m[4], a.m[5]);
  cv::warpAffine(in, ref, map, in.size(), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, cv::BORDER_REFLECT);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref.ptr<float>()[i], 1.0) << i;
}

// Index i on an axis of n under a fill mode: -1 for the constant outside.
int64_t ReferenceIndex(int64_t i, int64_t n, FillMode mode) {
  if (i >= 0 && i < n) return i;
  if (mode == FillMode::kConstant) return -1;
  if (mode == FillMode::kNearest) return i < 0 ? 0 : n - 1;
  const int64_t r = ((i % (2 * n)) + 2 * n) % (2 * n);  // fedcba|abcdef|fedcba
  return r < n ? r : 2 * n - 1 - r;
}

// A uint8 image's rescaled warp into planes, one pixel at a time in double.
std::vector<float> ReferenceWarp(const WarpSpec& spec, const Affine& a, const std::vector<uint8_t>& src) {
  const int64_t h = spec.dims.h, w = spec.dims.w, c = spec.dims.c;
  std::vector<float> out(h * w * c);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      float fx = std::fma(a.m[0], static_cast<float>(x), a.m[1] * y + a.m[2]);
      float fy = std::fma(a.m[3], static_cast<float>(x), a.m[4] * y + a.m[5]);
      if (a.projective()) {
        const float wx = std::fma(a.p[0], static_cast<float>(x), a.p[1] * y + a.p[2]);
        fx = std::clamp(fx / wx, -1e6f, 1e6f), fy = std::clamp(fy / wx, -1e6f, 1e6f);
      }
      const int64_t x0 = static_cast<int64_t>(std::floor(fx)), y0 = static_cast<int64_t>(std::floor(fy));
      const double ax = fx - std::floor(fx), ay = fy - std::floor(fy);
      for (int64_t ch = 0; ch < c; ++ch) {
        auto at = [&](int64_t yy, int64_t xx) {
          const int64_t xi = ReferenceIndex(xx, w, spec.fill_mode), yi = ReferenceIndex(yy, h, spec.fill_mode);
          return xi < 0 || yi < 0 ? (spec.fill_value - spec.offset) / spec.scale : src[(yi * w + xi) * c + ch];
        };
        const double top = at(y0, x0) * (1 - ax) + at(y0, x0 + 1) * ax;
        const double bottom = at(y0 + 1, x0) * (1 - ax) + at(y0 + 1, x0 + 1) * ax;
        out[(ch * h + y) * w + x] = static_cast<float>((top * (1 - ay) + bottom * ay) * spec.scale + spec.offset);
      }
    }
  }
  return out;
}

// The warp against the reference on the target the kernels run on now.
void ExpectRescaledWarpsMatchTheReference() {
  const ImageDims sizes[] = {{32, 32, 3}, {13, 21, 3}, {7, 40, 1}, {2, 2, 3}, {5, 1, 3}, {1, 9, 3}};
  for (const ImageDims& dims : sizes) {
    std::vector<uint8_t> src(dims.h * dims.w * dims.c);
    uint32_t state = 12345;
    for (uint8_t& v : src) v = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
    for (FillMode mode : {FillMode::kReflect, FillMode::kNearest, FillMode::kConstant}) {
      WarpSpec spec{DType::kUInt8, dims, mode, 0.375f};
      spec.rescaled = spec.chw_out = true;
      spec.scale = 1 / 255.f, spec.offset = 0.f;
      for (const double degrees : {0.0, 7.0, 36.0, -61.0, 90.0, 143.0, 180.0}) {
        for (const double zoom : {0.6, 1.0, 1.4}) {
          for (const double shift : {0.0, 2.6, -3.3}) {
            const double t = degrees * M_PI / 180;
            const double centred[6] = {std::cos(t) / zoom, -std::sin(t) / zoom, shift * dims.w,
                                       std::sin(t) / zoom, std::cos(t) / zoom,  -0.4 * shift * dims.h};
            for (const bool projective : {false, true}) {
              Affine map = FromCentred(centred, dims);
              if (projective) map.p[0] = 0.004f, map.p[1] = -0.003f, map.p[2] = 1.05f;
              std::vector<float> out(src.size());
              WarpAffine(spec, map, src.data(), reinterpret_cast<uint8_t*>(out.data()));
              const std::vector<float> want = ReferenceWarp(spec, map, src);
              for (size_t i = 0; i < want.size(); ++i) {
                ASSERT_NEAR(out[i], want[i], 1e-4)
                    << dims.h << "x" << dims.w << "x" << dims.c << ", mode " << static_cast<int>(mode) << ", "
                    << degrees << " degrees, zoom " << zoom << ", shift " << shift << ", projective " << projective
                    << ", element " << i;
              }
            }
          }
        }
      }
    }
  }
}

// W2's kind of warp (uint8 in, rescaled float planes out) against the
// reference on images of random bytes, whose taps taken from the wrong
// pixel show: rotations whose corners sample outside, zooms, shifts by
// several images (reflect's later periods) and projective maps, at every
// fill mode, on
// images of one row or column and of odd sizes, on each SIMD target the
// CPU has. Within 1e-4 of values in [0, 1].
TEST(WarpAffine, RescaledUint8WarpsMatchAPlainReferenceAtEveryBorder) {
  for (const char* cap : {"avx512", "avx2", "sse4"}) {
    if (!LimitSimd(cap).ok()) continue;
    SCOPED_TRACE(SimdTarget());
    ExpectRescaledWarpsMatchTheReference();
  }
  ASSERT_TRUE(LimitSimd("best").ok());
}

// A map of infinities and NaNs (a rotation by 1e39 degrees, stored as a
// float) reads pixels of the image or the fill; with reflect it spun for
// ever, stepping back from coordinates never clamped.
TEST(WarpAffine, MapsOfInfinitiesAndNaNsReadTheImageOrTheFill) {
  const std::vector<float> src = Smooth();
  const auto [lo, hi] = std::minmax_element(src.begin(), src.end());
  Affine wild;
  wild.m[0] = std::numeric_limits<float>::infinity(), wild.m[1] = -std::numeric_limits<float>::infinity();
  wild.m[3] = std::numeric_limits<float>::quiet_NaN(), wild.m[5] = 1e30f;
  for (FillMode mode : {FillMode::kReflect, FillMode::kNearest, FillMode::kConstant}) {
    for (float v : Warp(Spec(DType::kFloat32, mode), wild, src)) {
      ASSERT_TRUE(v == 5.f || (v >= *lo && v <= *hi)) << v;
    }
  }
}

// Streamed (non-temporal) stores write the same bytes as plain ones: into
// planes and one channel, from uint8 and float, for a width of whole
// vectors and one that is not, at an aligned destination and one float
// past it (which falls back to plain stores).
TEST(WarpAffine, StreamedOutputIsTheStoredOutput) {
  for (const int w : {32, 21}) {
    for (const int c : {1, 3}) {
      for (const bool rescaled : {true, false}) {
        WarpSpec spec{rescaled ? DType::kUInt8 : DType::kFloat32, ImageDims{17, w, c}, FillMode::kReflect, 0.f};
        spec.chw_out = true;
        spec.rescaled = rescaled;
        spec.scale = rescaled ? 1 / 255.f : 1.f;
        const int n = 17 * w * c;
        std::vector<uint8_t> bytes(n);
        std::vector<float> floats(n);
        for (int i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 37), floats[i] = bytes[i];
        const uint8_t* src = rescaled ? bytes.data() : reinterpret_cast<const uint8_t*>(floats.data());
        Affine map;
        map.m[0] = 0.9f, map.m[1] = -0.3f, map.m[2] = 4.f, map.m[3] = 0.3f, map.m[4] = 0.9f, map.m[5] = -2.f;
        std::vector<float> plain(n);
        WarpAffine(spec, map, src, reinterpret_cast<uint8_t*>(plain.data()));
        spec.stream = true;
        for (const int skew : {0, 1}) {
          alignas(64) static float streamed[2 * 17 * 32 * 3 + 16];
          WarpAffine(spec, map, src, reinterpret_cast<uint8_t*>(streamed + skew));
          EXPECT_TRUE(std::equal(plain.begin(), plain.end(), streamed + skew))
              << "w " << w << ", c " << c << ", rescaled " << rescaled << ", skew " << skew;
        }
      }
    }
  }
}

// Past the caches, the warp streams its own stores where each vector is a
// whole cache line (AVX-512), writes AVX2's half lines plainly, and leaves
// interleaved pixels and uint8 output to a SampleWriter.
TEST(WarpAffine, StreamsItsOwnStoresOnlyInWholeLines) {
  WarpSpec planes{DType::kUInt8, ImageDims{32, 32, 3}, FillMode::kReflect, 0.f};
  planes.chw_out = planes.rescaled = true;
  const WarpSpec interleaved{DType::kFloat32, ImageDims{17, 32, 3}, FillMode::kReflect, 0.f};
  const WarpSpec bytes{DType::kUInt8, ImageDims{17, 32, 1}, FillMode::kReflect, 0.f};
  for (const char* cap : {"avx512", "avx2", "sse4"}) {
    if (!LimitSimd(cap).ok()) continue;
    SCOPED_TRACE(SimdTarget());
    const bool whole_lines = absl::StartsWith(SimdTarget(), "AVX3") || absl::StartsWith(SimdTarget(), "AVX10");
    EXPECT_EQ(WarpBypassFor(planes), whole_lines ? WarpBypass::kItself : WarpBypass::kPlain);
    EXPECT_EQ(WarpBypassFor(interleaved), WarpBypass::kScratch);
    EXPECT_EQ(WarpBypassFor(bytes), WarpBypass::kScratch);
  }
  ASSERT_TRUE(LimitSimd("best").ok());
}

TEST(Then, ComposesMapsInOrder) {
  Affine shift;
  shift.m[2] = 3;
  const Affine both = Then(Rotation(90), shift);  // shift's output reads the rotation's
  const float x = 4, y = 2;
  const float sx = x + 3, sy = y;  // where the shift reads
  const Affine r = Rotation(90);
  EXPECT_NEAR(both.m[0] * x + both.m[1] * y + both.m[2], r.m[0] * sx + r.m[1] * sy + r.m[2], 1e-4);
  EXPECT_NEAR(both.m[3] * x + both.m[4] * y + both.m[5], r.m[3] * sx + r.m[4] * sy + r.m[5], 1e-4);
}

}  // namespace
}  // namespace sluice::kernels
