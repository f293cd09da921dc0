// Warps against OpenCV's warpAffine (WARP_INVERSE_MAP, bilinear). OpenCV
// quantizes interpolation weights to 1/32 of a pixel, so the inputs are
// smooth images (neighbours differ by at most ~30) and the stated tolerance
// is 1.0 per value (about 30/32), mean 0.25. A half-pixel error in the
// mapping would show as ~15.
#include <cmath>
#include <cstring>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "opencv2/imgproc.hpp"
#include "sluice/core/rng.h"
#include "sluice/ops/geometry_params.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using kernels::Affine;
using kernels::FillMode;
using kernels::PerspectiveMap;
using kernels::WarpAffine;
using kernels::WarpSpec;

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;
using testing::Pattern;
using testing::RunOp;

constexpr double kPi = 3.14159265358979323846;

// The map random_rotation draws for one sample (same stream as the kernel).
cv::Mat RotationMap(float lo, float hi, int h, int w, int64_t sample) {
  SampleRng rng(1, 42, 0, sample);
  const double t = rng.Uniform(lo, hi) * kPi / 180.0;
  const double cx = (w - 1) / 2.0, cy = (h - 1) / 2.0, c = std::cos(t), s = std::sin(t);
  return (cv::Mat_<double>(2, 3) << c, -s, cx - c * cx + s * cy, s, c, cy - s * cx - c * cy);
}

void ExpectClose(const float* got, const cv::Mat& ref, int n, double max_error) {
  double sum = 0, worst = 0;
  for (int i = 0; i < n; ++i) {
    const double e = std::abs(got[i] - ref.ptr<float>()[i]);
    sum += e;
    worst = std::max(worst, e);
  }
  EXPECT_LE(worst, max_error);
  EXPECT_LE(sum / n, 0.25);
}

// An h x w x c image of low spatial frequency, values in [28, 228].
template <typename T>
std::vector<T> Smooth(int h, int w, int c) {
  std::vector<T> v(h * w * c);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int ch = 0; ch < c; ++ch) {
        v[(y * w + x) * c + ch] = static_cast<T>(128 + 100 * std::sin(0.3 * x + ch) * std::cos(0.2 * y));
      }
    }
  }
  return v;
}

TEST(RandomRotation, MatchesOpenCvWarpAffineForEachBorderMode) {
  const int h = 32, w = 32;
  const std::vector<float> img = Smooth<float>(h, w, 3);
  for (auto [mode, border] : {std::pair{"reflect", cv::BORDER_REFLECT}, std::pair{"nearest", cv::BORDER_REPLICATE},
                              std::pair{"constant", cv::BORDER_CONSTANT}}) {
    std::vector<float> in;
    for (int r = 0; r < 3; ++r) in.insert(in.end(), img.begin(), img.end());
    const std::string attrs = std::string(R"({"degrees": 36, "fill_mode": ")") + mode + R"(", "fill_value": 7})";
    const std::vector<float> out =
        RunOp<float, float>("random_rotation", attrs, ColumnSpec{"image", DType::kFloat32, Shape{h, w, 3}}, in, 3);
    for (int r = 0; r < 3; ++r) {
      cv::Mat src(h, w, CV_32FC3, const_cast<float*>(img.data())), ref;
      cv::warpAffine(src, ref, RotationMap(-36, 36, h, w, r), cv::Size(w, h), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP,
                     border, cv::Scalar::all(7));
      SCOPED_TRACE(std::string(mode) + " sample " + std::to_string(r));
      // Where a constant fill meets the image the step is up to ~120, so
      // the quantized reference may be off by about 120/32 there.
      ExpectClose(out.data() + r * h * w * 3, ref, h * w * 3, border == cv::BORDER_CONSTANT ? 4.0 : 1.0);
    }
  }
}

TEST(RandomZoom, MatchesOpenCvOnUint8) {
  const int h = 28, w = 20;
  const std::vector<uint8_t> img = Smooth<uint8_t>(h, w, 1);
  const std::vector<uint8_t> out =
      RunOp<uint8_t, uint8_t>("random_zoom", R"({"scale": [0.8, 1.25], "fill_mode": "nearest"})",
                              ColumnSpec{"image", DType::kUInt8, Shape{h, w}}, img, 1);
  SampleRng rng(1, 42, 0, 0);
  const double inv = 1.0 / rng.Uniform(0.8f, 1.25f);
  const double cx = (w - 1) / 2.0, cy = (h - 1) / 2.0;
  cv::Mat map = (cv::Mat_<double>(2, 3) << inv, 0, cx - cx * inv, 0, inv, cy - cy * inv);
  cv::Mat src(h, w, CV_8U, const_cast<uint8_t*>(img.data())), ref;
  cv::warpAffine(src, ref, map, cv::Size(w, h), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, cv::BORDER_REPLICATE);
  for (int i = 0; i < h * w; ++i) ASSERT_NEAR(out[i], ref.data[i], 1) << "at " << i;
}

// Zoomed out 5x, the map reaches two images past each edge: reflected
// borders a whole period away (not just the next reflection), as OpenCV's.
TEST(RandomZoom, FarPastTheEdgesReflectsAsOpenCv) {
  const int h = 32, w = 24;
  const std::vector<float> img = Smooth<float>(h, w, 3);
  const std::vector<float> out = RunOp<float, float>("random_zoom", R"({"scale": [0.2, 0.2], "fill_mode": "reflect"})",
                                                     ColumnSpec{"image", DType::kFloat32, Shape{h, w, 3}}, img, 1);
  const double inv = 1.0 / 0.2f, cx = (w - 1) / 2.0, cy = (h - 1) / 2.0;
  cv::Mat map = (cv::Mat_<double>(2, 3) << inv, 0, cx - cx * inv, 0, inv, cy - cy * inv);
  cv::Mat src(h, w, CV_32FC3, const_cast<float*>(img.data())), ref;
  cv::warpAffine(src, ref, map, cv::Size(w, h), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, cv::BORDER_REFLECT);
  ExpectClose(out.data(), ref, h * w * 3, 1.0);
}

TEST(RandomFlip, FlipsExactlyAboutHalfTheSamples) {
  const int n = 200;
  std::vector<uint8_t> in;
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 6; ++i) in.push_back(static_cast<uint8_t>(i));  // 1 x 2 x 3 image
  }
  const std::vector<uint8_t> out =
      RunOp<uint8_t, uint8_t>("random_flip", "{}", ColumnSpec{"image", DType::kUInt8, Shape{1, 2, 3}}, in, n);
  int flipped = 0;
  for (int r = 0; r < n; ++r) {
    const std::vector<uint8_t> sample(out.begin() + 6 * r, out.begin() + 6 * r + 6);
    if (sample == std::vector<uint8_t>{3, 4, 5, 0, 1, 2}) {
      ++flipped;
    } else {
      ASSERT_EQ(sample, (std::vector<uint8_t>{0, 1, 2, 3, 4, 5}));
    }
  }
  EXPECT_GT(flipped, 70);
  EXPECT_LT(flipped, 130);
}

// Written past the caches (a large batch's final column), the same bytes:
// resampled, and flipped (whole pixels copied).
TEST(RandomRotation, PastTheCachesTheImagesAreTheSame) {
  const ColumnSpec spec{"image", DType::kUInt8, Shape{9, 13, 3}};
  const std::vector<uint8_t> in = Smooth<uint8_t>(9, 13 * 3 * 6, 1);
  for (const char* op : {"random_rotation", "random_flip"}) {
    const char* attrs = std::string(op) == "random_flip" ? "{}" : R"({"degrees": 30})";
    EXPECT_EQ((RunOp<uint8_t, uint8_t>(op, attrs, spec, in, 6, 1, 0, 42, true)),
              (RunOp<uint8_t, uint8_t>(op, attrs, spec, in, 6)))
        << op;
  }
}

TEST(RandomFlip, PIsTheShareFlippedPerDirection) {
  // 2,000 samples, p = 0.2: 400 flipped within 5 binomial deviations (17.9);
  // vertical flips of a 2 x 1 image; p = 1 flips all.
  const int n = 2000;
  std::vector<uint8_t> in;
  for (int r = 0; r < n; ++r) in.insert(in.end(), {1, 2});
  const ColumnSpec spec{"image", DType::kUInt8, Shape{2, 1, 1}};
  const std::vector<uint8_t> out =
      RunOp<uint8_t, uint8_t>("random_flip", R"({"mode": "vertical", "p": 0.2})", spec, in, n);
  int flipped = 0;
  for (int r = 0; r < n; ++r) flipped += out[2 * r] == 2 && out[2 * r + 1] == 1;
  EXPECT_NEAR(flipped, 400, 5 * 17.9);
  const std::vector<uint8_t> all =
      RunOp<uint8_t, uint8_t>("random_flip", R"({"mode": "vertical", "p": 1})", spec, in, n);
  for (int r = 0; r < n; ++r) ASSERT_EQ(all[2 * r], 2) << "row " << r;
}

TEST(RandomAffine, EqualsTorchvisionsAffineWithBilinearInterpolation) {
  // A smooth float image, so that a coordinate's last bits move a value by
  // little: each parameter set as a range of one value against F.affine
  // with zeros outside (fill None; with a fill, torchvision blends the
  // border pixels with it by the share of their taps inside, twice, where
  // sluice, as OpenCV, takes the fill for the taps outside).
  constexpr int64_t kH = 20, kW = 24, kC = 3;
  std::vector<float> image(kH * kW * kC);
  for (int64_t y = 0; y < kH; ++y)
    for (int64_t x = 0; x < kW; ++x)
      for (int64_t c = 0; c < kC; ++c) image[(y * kW + x) * kC + c] = 0.5f + 0.4f * std::sin(0.3f * x + 0.2f * y + c);
  struct Case {
    std::string attrs;
    double angle, scale, shear_x, shear_y;
  };
  const std::vector<Case> cases = {
      {R"({"degrees": [30, 30]})", 30, 1, 0, 0},
      {R"({"degrees": [-20, -20], "scale": [0.8, 0.8], "shear": [10, 10]})", -20, 0.8, 10, 0},
      {R"({"degrees": [0, 0], "scale": [1.2, 1.2], "shear": [0, 0, -15, -15]})", 0, 1.2, 0, -15},
      {R"({"degrees": [100, 100], "scale": [0.6, 0.6], "shear": [-5, -5, 8, 8]})", 100, 0.6, -5, 8},
  };
  sluice::testing::TempDir dir;
  const ColumnSpec spec{"image", DType::kFloat32, Shape{kH, kW, kC}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.attrs);
    const std::vector<float> got = RunOp<float, float>("random_affine", c.attrs, spec, image, 1);
    const std::string want_bytes = testing::TorchvisionReference(
        dir.path(), std::string(reinterpret_cast<const char*>(image.data()), image.size() * 4), {kH, kW, kC}, "float32",
        {{"op", "affine"}, {"angle", c.angle}, {"scale", c.scale}, {"shear", {c.shear_x, c.shear_y}}});
    ASSERT_EQ(want_bytes.size(), got.size() * 4);
    const float* want = reinterpret_cast<const float*>(want_bytes.data());
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LT(worst, 2e-4f);
  }
}

// A smooth float image [h, w, 3] (values in [0.1, 0.9]).
std::vector<float> SmoothImage(int64_t h, int64_t w) {
  std::vector<float> image(h * w * 3);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < 3; ++c) image[(y * w + x) * 3 + c] = 0.5f + 0.4f * std::sin(0.3f * x + 0.2f * y + c);
  return image;
}

TEST(RandomPerspective, TheMapOfGivenCornersEqualsTorchvisionsPerspective) {
  // torchvision solves the coefficients in float32 by least squares, this
  // in double: coordinates agree to ~1e-4 pixel, values to ~1e-4.
  constexpr int64_t kH = 30, kW = 40;
  const std::vector<float> image = SmoothImage(kH, kW);
  const std::vector<std::vector<int>> cases = {
      {3, 2, 36, 0, 39, 27, 0, 29},
      {9, 7, 30, 7, 30, 22, 9, 22},
      {0, 0, 39, 0, 39, 29, 0, 29},  // no change
      {12, 1, 39, 10, 25, 29, 2, 20},
  };
  const ImageDims dims{kH, kW, 3};
  const WarpSpec spec{DType::kFloat32, dims, FillMode::kConstant, 0.f};
  sluice::testing::TempDir dir;
  for (const std::vector<int>& corners : cases) {
    SCOPED_TRACE(::testing::PrintToString(corners));
    std::vector<float> got(image.size());
    WarpAffine(spec, PerspectiveMap(corners.data(), dims), reinterpret_cast<const uint8_t*>(image.data()),
               reinterpret_cast<uint8_t*>(got.data()));
    nlohmann::json endpoints = nlohmann::json::array();
    for (int i = 0; i < 4; ++i) endpoints.push_back({corners[2 * i], corners[2 * i + 1]});
    const std::string want_bytes = testing::TorchvisionReference(
        dir.path(), std::string(reinterpret_cast<const char*>(image.data()), image.size() * 4), {kH, kW, 3}, "float32",
        {{"op", "perspective"}, {"endpoints", endpoints}});
    ASSERT_EQ(want_bytes.size(), got.size() * 4);
    const float* want = reinterpret_cast<const float*>(want_bytes.data());
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LT(worst, 1e-3f);
  }
}

// Where a perspective map moved the image's corners (torchvision's
// endpoints). The map is M = T(-1/2) H T(1/2) of torchvision's H, which
// takes the endpoints to the corners, so an endpoint is M^-1(S - 1/2) + 1/2
// of the corner S.
std::vector<double> MovedCorners(const Affine& a, const ImageDims& d) {
  // M^-1 by cofactors (a projective map needs no determinant).
  const double m[3][3] = {{a.m[0], a.m[1], a.m[2]}, {a.m[3], a.m[4], a.m[5]}, {a.p[0], a.p[1], a.p[2]}};
  double inv[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      inv[j][i] = m[(i + 1) % 3][(j + 1) % 3] * m[(i + 2) % 3][(j + 2) % 3] -
                  m[(i + 1) % 3][(j + 2) % 3] * m[(i + 2) % 3][(j + 1) % 3];
  std::vector<double> out;
  const double w1 = static_cast<double>(d.w - 1), h1 = static_cast<double>(d.h - 1);
  for (const auto& [x, y] : std::vector<std::pair<double, double>>{{0, 0}, {w1, 0}, {w1, h1}, {0, h1}}) {
    const double u = x - 0.5, v = y - 0.5;
    const double X = inv[0][0] * u + inv[0][1] * v + inv[0][2], Y = inv[1][0] * u + inv[1][1] * v + inv[1][2];
    const double W = inv[2][0] * u + inv[2][1] * v + inv[2][2];
    out.push_back(X / W + 0.5);
    out.push_back(Y / W + 0.5);
  }
  return out;
}

// random_perspective's part, always applied.
WarpPart Perspective(double distortion) {
  WarpPart part;
  part.kind = WarpPart::Kind::kPerspective;
  part.distortion = distortion;
  part.p = 1.f;
  return part;
}

// The corners sample `sample` moved (MovedCorners).
std::vector<double> CornersOf(const WarpPart& part, const ImageDims& dims, int64_t sample) {
  SampleRng rng(1, 42, 0, sample);
  return MovedCorners(SampleMap(part, dims, rng), dims);
}

TEST(RandomPerspective, DrawsTorchvisionsCornersWithProbabilityP) {
  // RandomPerspective(0.5) on 40 x 30: each corner within int(0.5 * 20) = 10
  // of its x edge and int(0.5 * 15) = 7 of its y edge, every offset drawn.
  const ImageDims dims{30, 40, 3};
  WarpPart part = Perspective(0.5);
  std::set<int> seen_x, seen_y;
  for (int64_t sample = 0; sample < 400; ++sample) {
    const std::vector<double> c = CornersOf(part, dims, sample);
    for (double v : c) ASSERT_NEAR(v, std::round(v), 2e-3);  // whole pixels, as get_params draws
    const int x[4] = {static_cast<int>(std::round(c[0])), 39 - static_cast<int>(std::round(c[2])),
                      39 - static_cast<int>(std::round(c[4])), static_cast<int>(std::round(c[6]))};
    const int y[4] = {static_cast<int>(std::round(c[1])), static_cast<int>(std::round(c[3])),
                      29 - static_cast<int>(std::round(c[5])), 29 - static_cast<int>(std::round(c[7]))};
    for (int i = 0; i < 4; ++i) {
      ASSERT_GE(x[i], 0);
      ASSERT_LE(x[i], 10);
      ASSERT_GE(y[i], 0);
      ASSERT_LE(y[i], 7);
      seen_x.insert(x[i]), seen_y.insert(y[i]);
    }
  }
  EXPECT_EQ(seen_x.size(), 11u);
  EXPECT_EQ(seen_y.size(), 8u);
  // p = 0.3: the identity 70% of the time, within 5 binomial deviations.
  part.p = 0.3f;
  int distorted = 0;
  for (int64_t sample = 0; sample < 2000; ++sample) {
    SampleRng rng(1, 42, 0, sample);
    distorted += SampleMap(part, dims, rng).projective();
  }
  EXPECT_NEAR(distorted, 600, 5 * std::sqrt(2000 * 0.3 * 0.7));
}

// torchvision's bound is int(distortion_scale * half_width) in double:
// 0.29 * 100 is 28.999999999999996 there (28), and 29 in float.
TEST(RandomPerspective, TheCornersBoundIsTakenInDoubleAsTorchvisionTakesIt) {
  const ImageDims dims{200, 200, 3};
  int widest = 0;
  for (int64_t sample = 0; sample < 1000; ++sample) {
    widest = std::max(widest, static_cast<int>(std::round(CornersOf(Perspective(0.29), dims, sample)[0])));
  }
  EXPECT_EQ(widest, 28);
}

TEST(RandomPerspective, FusesWithTheOtherWarpsAndRunsAsOneMap) {
  // The op alone equals WarpAffine with the map SampleMap draws; fused
  // after a flip, the composed map (Then) is the one applied.
  const ColumnSpec spec{"image", DType::kFloat32, Shape{30, 40, 3}};
  const std::vector<float> image = SmoothImage(30, 40);
  const ImageDims dims{30, 40, 3};
  const std::vector<float> got = RunOp<float, float>("random_perspective", R"({"p": 1})", spec, image, 1);
  SampleRng rng(1, 42, 0, 0);
  std::vector<float> want(image.size());
  WarpAffine(WarpSpec{DType::kFloat32, dims, FillMode::kConstant, 0.f}, SampleMap(Perspective(0.5), dims, rng),
             reinterpret_cast<const uint8_t*>(image.data()), reinterpret_cast<uint8_t*>(want.data()));
  EXPECT_EQ(got, want);
  EXPECT_NE(got, image);
}

TEST(RandomAffine, TranslateShiftsByWholePixelsWithinItsShare) {
  // A row of 8 pixels, translate [0.25, 0]: shifts of -2..2 pixels, zeros come in.
  const int n = 500;
  std::vector<float> in;
  for (int r = 0; r < n; ++r)
    for (int x = 0; x < 8; ++x) in.push_back(static_cast<float>(x + 1));
  const std::vector<float> out = RunOp<float, float>("random_affine", R"({"degrees": 0, "translate": [0.25, 0]})",
                                                     ColumnSpec{"image", DType::kFloat32, Shape{1, 8}}, in, n);
  std::set<int> shifts;
  for (int r = 0; r < n; ++r) {
    int shift = 99;
    for (int k = -2; k <= 2; ++k) {
      bool match = true;
      for (int x = 0; x < 8; ++x) {
        const int from = x - k;
        match = match && out[r * 8 + x] == (from >= 0 && from < 8 ? static_cast<float>(from + 1) : 0.f);
      }
      if (match) shift = k;
    }
    ASSERT_NE(shift, 99) << "row " << r << " is no whole-pixel shift within 2";
    shifts.insert(shift);
  }
  EXPECT_EQ(shifts.size(), 5u);
}

TEST(FuseWarps, EqualsTheOpsAppliedInTurnWithinInterpolationError) {
  // A smooth image: resampling it twice or once differs by little.
  const int h = 32, w = 32;
  std::vector<float> img(h * w);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) img[y * w + x] = 100 + 50 * std::sin(x * 0.2) * std::cos(y * 0.15);
  }
  const ColumnSpec spec{"image", DType::kFloat32, Shape{h, w}};
  auto flip = testing::Infer("random_flip", "{}", spec);
  auto rot = testing::Infer("random_rotation", R"({"degrees": 30, "fill_mode": "nearest"})", spec);
  auto zoom = testing::Infer("random_zoom", R"({"scale": [0.9, 1.1], "fill_mode": "nearest"})", spec);
  ASSERT_TRUE(flip.ok() && rot.ok() && zoom.ok());
  const std::vector<std::pair<std::shared_ptr<const Kernel>, uint64_t>> parts = {
      {testing::CpuKernel("random_flip", *flip), 1},
      {testing::CpuKernel("random_rotation", *rot), 2},
      {testing::CpuKernel("random_zoom", *zoom), 3}};
  // What the graph's fusion pass makes of the three.
  InferredOp fused_op = *flip;
  FusedWarpParams fused_params{flip->params<WarpParams>().spec, {}};
  uint64_t key = 1;
  for (const auto* op : {&*flip, &*rot, &*zoom}) fused_params.parts.emplace_back(op->params<WarpParams>().part, key++);
  fused_op.SetParams(fused_params);
  std::shared_ptr<const Kernel> fused = testing::CpuKernel(kFusedWarpOp, fused_op);
  for (int64_t sample = 0; sample < 8; ++sample) {
    KernelContext ctx;
    ctx.rows = 1;
    ctx.seed = 9;
    ctx.first_sample = sample;
    std::vector<float> a = img, b(h * w), fused_out(h * w);
    for (const auto& [kernel, key] : parts) {  // one op after another
      ctx.op_key = key;
      SLUICE_ASSERT_OK(kernel->Run(ctx, {ColumnRef{reinterpret_cast<uint8_t*>(a.data()), h * w * 4}},
                                   {ColumnRef{reinterpret_cast<uint8_t*>(b.data()), h * w * 4}}));
      std::swap(a, b);
    }
    SLUICE_ASSERT_OK(fused->Run(ctx, {ColumnRef{reinterpret_cast<uint8_t*>(img.data()), h * w * 4}},
                                {ColumnRef{reinterpret_cast<uint8_t*>(fused_out.data()), h * w * 4}}));
    // Written past the caches (a large batch's final column): the same bytes.
    std::vector<float> streamed(h * w);
    KernelContext past = ctx;
    past.bypass_cache = true;
    SLUICE_ASSERT_OK(fused->Run(past, {ColumnRef{reinterpret_cast<uint8_t*>(img.data()), h * w * 4}},
                                {ColumnRef{reinterpret_cast<uint8_t*>(streamed.data()), h * w * 4}}));
    EXPECT_EQ(streamed, fused_out);
    // Away from the borders (where sequential ops resample already-filled
    // pixels) the two differ only by the extra interpolation.
    double sum = 0, worst = 0;
    for (int y = 8; y < 24; ++y) {
      for (int x = 8; x < 24; ++x) {
        const double e = std::abs(a[y * w + x] - fused_out[y * w + x]);
        sum += e;
        worst = std::max(worst, e);
      }
    }
    EXPECT_LT(sum / 256, 0.5) << "sample " << sample;  // values span 100 +- 50
    EXPECT_LT(worst, 3.0) << "sample " << sample;
  }
}

TEST(HwcToChw, Transposes) {
  std::vector<float> in = {1, 2, 3, 4, 5, 6};  // 1 x 2 x 3
  const std::vector<float> out =
      RunOp<float, float>("hwc_to_chw", "{}", ColumnSpec{"image", DType::kFloat32, Shape{1, 2, 3}}, in, 1);
  EXPECT_EQ(out, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

// A warp writing planes (a folded hwc_to_chw) gives the [H,W,C] output's
// values, transposed, on every path: float with 1 and 3 channels (vector),
// uint8 and other channel counts (scalar), and every border mode.
TEST(WarpAffine, WritingPlanesEqualsTransposingTheInterleavedOutput) {
  for (DType dtype : {DType::kFloat32, DType::kUInt8}) {
    for (int64_t c : {1, 3, 4}) {
      for (FillMode fill : {FillMode::kConstant, FillMode::kNearest, FillMode::kReflect}) {
        const ImageDims dims{23, 37, c};  // widths not a multiple of the vector
        const int64_t n = dims.h * dims.w * c;
        const size_t size = DTypeSize(dtype);
        std::vector<uint8_t> src(n * size);
        for (int64_t i = 0; i < n; ++i) {
          if (dtype == DType::kFloat32) {
            reinterpret_cast<float*>(src.data())[i] = static_cast<float>((i * 37) % 251);
          } else {
            src[i] = static_cast<uint8_t>((i * 37) % 251);
          }
        }
        Affine map;  // rotation by 0.3 rad about the centre, zoomed 1.1
        const float cs = std::cos(0.3f) / 1.1f, sn = std::sin(0.3f) / 1.1f;
        map.m[0] = cs, map.m[1] = -sn, map.m[2] = 5.f, map.m[3] = sn, map.m[4] = cs, map.m[5] = -4.f;
        WarpSpec hwc{dtype, dims, fill, 7.f};
        WarpSpec chw = hwc;
        chw.chw_out = true;
        std::vector<uint8_t> interleaved(n * size), planes(n * size);
        WarpAffine(hwc, map, src.data(), interleaved.data());
        WarpAffine(chw, map, src.data(), planes.data());
        for (int64_t p = 0; p < dims.h * dims.w; ++p) {
          for (int64_t ch = 0; ch < c; ++ch) {
            ASSERT_EQ(std::memcmp(&planes[(ch * dims.h * dims.w + p) * size], &interleaved[(p * c + ch) * size], size),
                      0)
                << DTypeName(dtype) << " c=" << c << " pixel " << p << " channel " << ch;
          }
        }
      }
    }
  }
}

// A rescale folded into the warp: uint8 pixels interpolated, then rescaled,
// equal to warping the rescaled float image within float rounding, for the
// vector paths (1 and 3 channels), the scalar one (4), every border mode,
// widths that are no multiple of the vector and images smaller than a word.
TEST(WarpAffine, ARescaledWarpOfUint8EqualsTheWarpOfTheRescaledFloats) {
  for (const ImageDims dims : {ImageDims{23, 37, 3}, ImageDims{23, 37, 1}, ImageDims{9, 5, 4}, ImageDims{1, 1, 1},
                               ImageDims{1, 1, 3}, ImageDims{2, 1, 1}}) {
    for (FillMode fill : {FillMode::kConstant, FillMode::kNearest, FillMode::kReflect}) {
      SCOPED_TRACE(::testing::Message() << dims.h << "x" << dims.w << "x" << dims.c << " fill "
                                        << static_cast<int>(fill));
      const int64_t n = dims.h * dims.w * dims.c;
      const float scale = 1 / 255.f, offset = -0.5f;
      std::vector<uint8_t> pixels(n);
      std::vector<float> rescaled(n);
      for (int64_t i = 0; i < n; ++i) {
        pixels[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
        rescaled[i] = pixels[i] * scale + offset;
      }
      Affine map;  // rotation by 0.5 rad about a point off the centre, zoomed 0.9: corners fall outside
      const float cs = std::cos(0.5f) / 0.9f, sn = std::sin(0.5f) / 0.9f;
      map.m[0] = cs, map.m[1] = -sn, map.m[2] = 3.f, map.m[3] = sn, map.m[4] = cs, map.m[5] = -2.f;
      WarpSpec float_spec{DType::kFloat32, dims, fill, 0.25f};
      WarpSpec u8_spec{DType::kUInt8, dims, fill, 0.25f};
      u8_spec.rescaled = true;
      u8_spec.scale = scale;
      u8_spec.offset = offset;
      std::vector<float> expected(n), got(n);
      WarpAffine(float_spec, map, reinterpret_cast<const uint8_t*>(rescaled.data()),
                 reinterpret_cast<uint8_t*>(expected.data()));
      WarpAffine(u8_spec, map, pixels.data(), reinterpret_cast<uint8_t*>(got.data()));
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], expected[i], 2e-6) << "at " << i;
      // Writing planes writes the same values.
      u8_spec.chw_out = true;
      std::vector<float> planes(n);
      WarpAffine(u8_spec, map, pixels.data(), reinterpret_cast<uint8_t*>(planes.data()));
      for (int64_t p = 0; p < dims.h * dims.w; ++p) {
        for (int64_t ch = 0; ch < dims.c; ++ch) ASSERT_EQ(planes[ch * dims.h * dims.w + p], got[p * dims.c + ch]);
      }
    }
  }
}

TEST(RandomRotation, BadFillModeNamesTheAttr) {
  EXPECT_THAT(
      testing::Infer("random_rotation", R"({"degrees": 10, "fill_mode": "mirror"})",
                     ColumnSpec{"image", DType::kFloat32, Shape{4, 4}}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("op 'random_rotation': attr 'fill_mode' must be")));
}

}  // namespace
}  // namespace sluice::ops
