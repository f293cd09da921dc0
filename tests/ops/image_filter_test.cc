// gaussian_blur and grey_dilation against OpenCV (an independent
// implementation): float within 1e-5, uint8 within 1 (OpenCV's uint8 blur is
// fixed-point), dilation exactly.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "opencv2/imgproc.hpp"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using testing::Attrs;
using ::testing::HasSubstr;
using testing::Pattern;
using testing::RunOp;

TEST(GaussianBlur, FloatMatchesOpenCvReflect101) {
  for (auto [h, w, c] : {std::tuple{28, 28, 1}, {32, 32, 3}, {5, 9, 2}}) {
    const ColumnSpec spec{"image", DType::kFloat32, c == 1 ? Shape{h, w} : Shape{h, w, c}};
    std::vector<float> in = Pattern<float>(h * w * c, h);
    for (float& v : in) v /= 255.f;
    const std::vector<float> out = RunOp<float, float>("gaussian_blur", R"({"ksize": 11, "sigma": 0.8})", spec, in, 1);
    cv::Mat src(h, w, CV_32FC(c), in.data()), ref;
    cv::GaussianBlur(src, ref, cv::Size(11, 11), 0.8, 0.8, cv::BORDER_REFLECT_101);
    const float* r = ref.ptr<float>();
    for (int i = 0; i < h * w * c; ++i) ASSERT_NEAR(out[i], r[i], 1e-5) << "at " << i;
  }
}

// A small sigma leaves most of an 11-tap kernel's weights negligible: the
// passes skip them, and the values stay OpenCV's, which sums every tap.
TEST(GaussianBlur, SmallSigmasSkipNegligibleTapsWithoutChangingValues) {
  const ColumnSpec spec{"image", DType::kFloat32, Shape{28, 28}};
  std::vector<float> in = Pattern<float>(28 * 28, 5);
  for (float& v : in) v = (v / 255.f - 0.1307f) / 0.3081f;
  for (const double sigma : {0.1, 0.25, 0.5, 0.7, 0.9}) {
    const std::vector<float> out =
        RunOp<float, float>("gaussian_blur", absl::StrCat(R"({"ksize": [11, 5], "sigma": )", sigma, "}"), spec, in, 1);
    cv::Mat src(28, 28, CV_32FC1, in.data()), ref;
    cv::GaussianBlur(src, ref, cv::Size(5, 11), sigma, sigma, cv::BORDER_REFLECT_101);
    const float* r = ref.ptr<float>();
    for (int i = 0; i < 28 * 28; ++i) ASSERT_NEAR(out[i], r[i], 1e-5) << "sigma " << sigma << " at " << i;
  }
}

TEST(GaussianBlur, Uint8MatchesOpenCvWithinOne) {
  const ColumnSpec spec{"image", DType::kUInt8, Shape{32, 32, 3}};
  const std::vector<uint8_t> in = Pattern<uint8_t>(32 * 32 * 3, 9);
  const std::vector<uint8_t> out =
      RunOp<uint8_t, uint8_t>("gaussian_blur", R"({"ksize": [5, 11], "sigma": 1.5})", spec, in, 1);
  cv::Mat src(32, 32, CV_8UC3, const_cast<uint8_t*>(in.data())), ref;
  cv::GaussianBlur(src, ref, cv::Size(11, 5), 1.5, 1.5, cv::BORDER_REFLECT_101);
  for (int i = 0; i < 32 * 32 * 3; ++i) ASSERT_NEAR(out[i], ref.data[i], 1) << "at " << i;
}

// Blur shapes and kernels: small and large, one to four channels, kernels
// larger than the image, and rows several vectors long.
struct BlurCase {
  int h, w, c, kh, kw;
  double sigma;
  std::string Name() const { return absl::StrCat(h, "x", w, "x", c, " k", kh, "x", kw, " sigma ", sigma); }
  std::string Attrs() const { return absl::StrCat(R"({"ksize": [)", kh, ", ", kw, R"(], "sigma": )", sigma, "}"); }
};
const BlurCase kBlurCases[] = {{32, 32, 3, 11, 11, 0.8}, {28, 28, 1, 11, 11, 2.0}, {9, 13, 2, 5, 7, 0.3},
                               {32, 32, 3, 11, 5, 1.5},  {40, 70, 4, 31, 31, 6.0}, {6, 5, 1, 3, 3, 0.1},
                               {5, 9, 2, 11, 11, 2.0}};

// The exact blur of `in` (OpenCV's separable filter in double precision).
template <typename T>
std::vector<double> ExactBlur(const BlurCase& k, const std::vector<T>& in) {
  cv::Mat src, exact;
  cv::Mat(k.h, k.w, CV_MAKETYPE(cv::DataType<T>::depth, k.c), const_cast<T*>(in.data())).convertTo(src, CV_64F);
  cv::sepFilter2D(src, exact, CV_64F, cv::getGaussianKernel(k.kw, k.sigma, CV_64F),
                  cv::getGaussianKernel(k.kh, k.sigma, CV_64F), cv::Point(-1, -1), 0, cv::BORDER_REFLECT_101);
  return std::vector<double>(exact.ptr<double>(), exact.ptr<double>() + in.size());
}

TEST(GaussianBlur, FloatIsTheExactSumWithinFloatRounding) {
  for (const BlurCase& k : kBlurCases) {
    const ColumnSpec spec{"image", DType::kFloat32, Shape{k.h, k.w, k.c}};
    std::vector<float> in = Pattern<float>(k.h * k.w * k.c, k.kh * 31 + k.w);
    for (float& v : in) v = (v / 255.f - 0.1307f) / 0.3081f;
    const std::vector<float> out = RunOp<float, float>("gaussian_blur", k.Attrs(), spec, in, 1);
    const std::vector<double> exact = ExactBlur(k, in);
    for (size_t i = 0; i < in.size(); ++i) ASSERT_NEAR(out[i], exact[i], 1e-5) << k.Name() << " at " << i;
  }
}

// uint8 is blurred in 16-bit fixed point: within 0.1 of the exact sum
// before rounding, so on the exact sum's nearest level wherever that sum is
// not within 0.1 of a half, and never a level further.
TEST(GaussianBlur, Uint8FixedPointRoundsAsTheExactSum) {
  for (const BlurCase& k : kBlurCases) {
    const ColumnSpec spec{"image", DType::kUInt8, Shape{k.h, k.w, k.c}};
    const std::vector<uint8_t> in = Pattern<uint8_t>(k.h * k.w * k.c, k.kh * 31 + k.w);
    const std::vector<uint8_t> out = RunOp<uint8_t, uint8_t>("gaussian_blur", k.Attrs(), spec, in, 1);
    const std::vector<double> e = ExactBlur(k, in);
    int near_half = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_LT(std::abs(out[i] - e[i]), 0.6) << k.Name() << " at " << i << ": exact " << e[i];
      if (std::abs(e[i] - std::floor(e[i]) - 0.5) > 0.1) {
        ASSERT_EQ(out[i], std::lround(e[i])) << k.Name() << " at " << i << ": exact " << e[i];
      } else {
        ++near_half;
      }
    }
    EXPECT_LT(near_half, static_cast<int>(in.size()) / 4) << k.Name();
  }
}

// Written past the caches (a large batch's final column), the same bytes.
TEST(GaussianBlur, PastTheCachesTheImagesAreTheSame) {
  const ColumnSpec floats{"image", DType::kFloat32, Shape{28, 28}}, bytes{"image", DType::kUInt8, Shape{32, 32, 3}};
  const std::vector<float> f = Pattern<float>(5 * 28 * 28, 3);
  const std::vector<uint8_t> b = Pattern<uint8_t>(5 * 32 * 32 * 3, 4);
  const char* attrs = R"({"ksize": 11, "sigma": [0.1, 2.0]})";
  EXPECT_EQ((RunOp<float, float>("gaussian_blur", attrs, floats, f, 5, 1, 0, 42, true)),
            (RunOp<float, float>("gaussian_blur", attrs, floats, f, 5)));
  EXPECT_EQ((RunOp<uint8_t, uint8_t>("gaussian_blur", attrs, bytes, b, 5, 1, 0, 42, true)),
            (RunOp<uint8_t, uint8_t>("gaussian_blur", attrs, bytes, b, 5)));
}

// The fixed-point sums saturate at the top: white stays white.
TEST(GaussianBlur, Uint8WhiteStaysWhite) {
  const ColumnSpec spec{"image", DType::kUInt8, Shape{16, 16, 3}};
  const std::vector<uint8_t> white(16 * 16 * 3, 255);
  for (const char* attrs :
       {R"({"ksize": 11, "sigma": 0.8})", R"({"ksize": 1, "sigma": 1})", R"({"ksize": 3, "sigma": 0.05})"}) {
    const std::vector<uint8_t> out = RunOp<uint8_t, uint8_t>("gaussian_blur", attrs, spec, white, 1);
    EXPECT_EQ(out, white) << attrs;
  }
}

TEST(GaussianBlur, RandomSigmaIsDrawnPerSampleFromTheRange) {
  // Each sample equals OpenCV's blur with *some* sigma in [0.1, 2]; samples differ.
  const ColumnSpec spec{"image", DType::kFloat32, Shape{28, 28}};
  std::vector<float> one = Pattern<float>(28 * 28, 3);
  std::vector<float> in;
  for (int r = 0; r < 4; ++r) in.insert(in.end(), one.begin(), one.end());
  const std::vector<float> out =
      RunOp<float, float>("gaussian_blur", R"({"ksize": 11, "sigma": [0.1, 2.0]})", spec, in, 4);
  cv::Mat src(28, 28, CV_32F, one.data());
  for (int r = 0; r < 4; ++r) {
    double best = 1e9;
    for (double sigma = 0.1; sigma <= 2.0; sigma += 0.0005) {
      cv::Mat ref;
      cv::GaussianBlur(src, ref, cv::Size(11, 11), sigma, sigma, cv::BORDER_REFLECT_101);
      best = std::min(best,
                      cv::norm(ref, cv::Mat(28, 28, CV_32F, const_cast<float*>(out.data() + r * 784)), cv::NORM_INF));
    }
    EXPECT_LT(best, 0.05) << "sample " << r;
  }
  EXPECT_NE(std::vector<float>(out.begin(), out.begin() + 784),
            std::vector<float>(out.begin() + 784, out.begin() + 2 * 784));
}

TEST(GaussianBlur, BadAttrsNameTheAttr) {
  Schema schema({ColumnSpec{"image", DType::kFloat32, Shape{8, 8}}});
  EXPECT_THAT(OpRegistry::Global().Infer("gaussian_blur", Attrs(R"({"sigma": -1})"), schema),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'gaussian_blur': attr 'sigma' must be 1 or 2 values, each > 0, got [-1]")));
  EXPECT_THAT(OpRegistry::Global().Infer("gaussian_blur", Attrs(R"({"sigma": 1, "ksize": 4})"), schema),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'ksize' must be odd")));
  // A kernel however large is refused before anything is allocated for it.
  EXPECT_THAT(OpRegistry::Global().Infer("gaussian_blur", Attrs(R"({"sigma": 1, "ksize": [15, 2147483647]})"), schema),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'ksize' must be 1 or 2 values, each in "
                                                                     "[1, 1023], got [15, 2147483647]")));
  EXPECT_THAT(OpRegistry::Global().Infer("grey_dilation", Attrs(R"({"size": 1025})"), schema),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'size' must be 1 or 2 values")));
  Schema flat({ColumnSpec{"image", DType::kUInt8, Shape{3072}}});
  EXPECT_THAT(OpRegistry::Global().Infer("gaussian_blur", Attrs(R"({"sigma": 1})"), flat),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs an image [H,W] or [H,W,C]")));
}

TEST(GreyDilation, MatchesOpenCvDilate) {
  for (int k : {3, 5}) {
    const ColumnSpec spec{"image", DType::kUInt8, Shape{32, 32, 3}};
    const std::vector<uint8_t> in = Pattern<uint8_t>(32 * 32 * 3, k);
    const std::vector<uint8_t> out =
        RunOp<uint8_t, uint8_t>("grey_dilation", "{\"size\": " + std::to_string(k) + "}", spec, in, 1);
    cv::Mat src(32, 32, CV_8UC3, const_cast<uint8_t*>(in.data())), ref;
    cv::dilate(src, ref, cv::getStructuringElement(cv::MORPH_RECT, cv::Size(k, k)));
    EXPECT_EQ(std::vector<uint8_t>(ref.data, ref.data + in.size()), out) << "k=" << k;
  }
}

TEST(GreyDilation, FloatMatchesOpenCvDilate) {
  const ColumnSpec spec{"image", DType::kFloat32, Shape{9, 7}};
  std::vector<float> in = Pattern<float>(63, 4);
  for (float& v : in) v -= 128.f;  // negative values: the border must not win
  const std::vector<float> out = RunOp<float, float>("grey_dilation", R"({"size": 3})", spec, in, 1);
  cv::Mat src(9, 7, CV_32F, in.data()), ref;
  cv::dilate(src, ref, cv::getStructuringElement(cv::MORPH_RECT, cv::Size(3, 3)));
  EXPECT_EQ(std::vector<float>(ref.ptr<float>(), ref.ptr<float>() + 63), out);
}

}  // namespace
}  // namespace sluice::ops
