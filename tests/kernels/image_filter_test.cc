// The separable filters on their own, against OpenCV: the float blur within
// float rounding (1e-4), the uint8 fixed-point blur within one level of the
// float blur rounded, and the dilation exactly.
#include "sluice/kernels/image_filter.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "opencv2/imgproc.hpp"

namespace sluice::kernels {
namespace {

std::vector<uint8_t> Levels(int h, int w, int c) {
  std::vector<uint8_t> v(h * w * c);
  uint32_t x = 17;
  for (uint8_t& p : v) p = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
  return v;
}

TEST(GaussianTaps, AreNormalizedAndEqualOpenCvs) {
  for (int k : {1, 3, 7, 11}) {
    std::vector<float> taps(k);
    GaussianTaps(k, 0.8f, taps.data());
    const cv::Mat ref = cv::getGaussianKernel(k, 0.8, CV_64F);
    for (int i = 0; i < k; ++i) EXPECT_NEAR(taps[i], ref.at<double>(i), 1e-6) << k;
  }
}

TEST(BlurFloatImage, EqualsOpenCvsGaussianBlur) {
  for (auto [h, w, c] : {std::tuple{32, 32, 3}, std::tuple{28, 28, 1}, std::tuple{5, 40, 3}}) {
    const std::vector<uint8_t> levels = Levels(h, w, c);
    const std::vector<float> src(levels.begin(), levels.end());
    BlurTaps taps;
    taps.Compute(11, 11, 1.3f, /*fixed_point=*/false);
    const FilterShape shape(ImageDims{h, w, c}, 11, 11, /*reflect=*/true);
    std::vector<float> out(src.size());
    BlurFloatImage(src.data(), out.data(), shape, taps.w.data(), taps.w.data() + 11);
    cv::Mat in(h, w, CV_32FC(c), const_cast<float*>(src.data())), ref;
    cv::GaussianBlur(in, ref, cv::Size(11, 11), 1.3, 1.3, cv::BORDER_REFLECT_101);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref.ptr<float>()[i], 1e-3) << h << "x" << w;
  }
}

TEST(BlurFixedImage, IsWithinALevelOfTheFloatBlurRounded) {
  const int h = 32, w = 32, c = 3;
  const std::vector<uint8_t> src = Levels(h, w, c);
  const std::vector<float> as_float(src.begin(), src.end());
  BlurTaps taps;
  taps.Compute(11, 11, 0.8f, /*fixed_point=*/true);
  const FilterShape shape(ImageDims{h, w, c}, 11, 11, /*reflect=*/true);
  std::vector<uint8_t> fixed(src.size());
  std::vector<float> exact(src.size());
  BlurFixedImage(src.data(), fixed.data(), shape, taps.q.data(), taps.q.data() + 11);
  BlurFloatImage(as_float.data(), exact.data(), shape, taps.w.data(), taps.w.data() + 11);
  for (size_t i = 0; i < src.size(); ++i) ASSERT_LE(std::abs(fixed[i] - std::nearbyint(exact[i])), 1) << i;
}

TEST(DilateImage, EqualsOpenCvsDilate) {
  const int h = 19, w = 23, c = 3;
  const std::vector<uint8_t> src = Levels(h, w, c);
  const FilterShape shape(ImageDims{h, w, c}, 5, 3, /*reflect=*/false);
  std::vector<uint8_t> out(src.size());
  DilateImage(src.data(), out.data(), shape);
  cv::Mat in(h, w, CV_8UC3, const_cast<uint8_t*>(src.data())), ref;
  cv::dilate(in, ref, cv::getStructuringElement(cv::MORPH_RECT, cv::Size(3, 5)));
  EXPECT_EQ(0, std::memcmp(out.data(), ref.data, out.size()));
}

}  // namespace
}  // namespace sluice::kernels
