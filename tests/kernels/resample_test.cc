// The resampler on its own: exact where a bilinear (triangle) filter is
// exact, PIL's taps summing to one, and within a level of the filter
// computed in double at any shrink.
#include "sluice/kernels/resample.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::kernels {
namespace {

TEST(ResampleBilinear, TheWholeImageAtItsOwnSizeIsCopied) {
  const int w = 17, h = 9, c = 3;
  std::vector<uint8_t> src(w * h * c);
  std::iota(src.begin(), src.end(), 0);
  std::vector<uint8_t> out(src.size());
  ResampleBilinear(src.data(), w, h, c, w * c, Window{0, 0, w, h}, out.data(), w, h);
  EXPECT_EQ(out, src);
}

TEST(ResampleBilinear, AConstantImageStaysConstantAtAnySize) {
  const int w = 40, h = 30, c = 3;
  std::vector<uint8_t> src(w * h * c, 201);
  for (auto [ow, oh] : {std::pair{7, 5}, std::pair{40, 11}, std::pair{97, 61}}) {
    std::vector<uint8_t> out(ow * oh * c);
    ResampleBilinear(src.data(), w, h, c, w * c, Window{3.5, 2.25, 30, 20}, out.data(), ow, oh);
    for (uint8_t v : out) ASSERT_EQ(v, 201) << ow << "x" << oh;
  }
}

// PIL's antialiased bilinear filter along one axis, in double: output i's
// normalized triangle (as wide as the shrink) over source pixels lo[i]...
struct Filter {
  std::vector<int> lo;
  std::vector<std::vector<double>> weights;
};

Filter FilterInDouble(int size, int out) {
  Filter f;
  const double scale = static_cast<double>(size) / out, support = std::max(scale, 1.0);
  for (int i = 0; i < out; ++i) {
    const double center = (i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(std::floor(center - support + 0.5)), 0);
    const int hi = std::min(static_cast<int>(std::floor(center + support + 0.5)), size);
    std::vector<double> w;
    for (int x = lo; x < hi; ++x) w.push_back(std::max(0.0, 1 - std::abs((x - center + 0.5) / support)));
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    for (double& v : w) v /= total;
    f.lo.push_back(lo);
    f.weights.push_back(std::move(w));
  }
  return f;
}

// The whole image resized in double (HWC).
std::vector<double> ResizeInDouble(const std::vector<uint8_t>& src, int w, int h, int c, int ow, int oh) {
  const Filter fx = FilterInDouble(w, ow), fy = FilterInDouble(h, oh);
  std::vector<double> out(static_cast<size_t>(ow) * oh * c, 0.0);
  for (int j = 0; j < oh; ++j) {
    for (size_t ky = 0; ky < fy.weights[j].size(); ++ky) {
      const int y = fy.lo[j] + static_cast<int>(ky);
      for (int i = 0; i < ow; ++i) {
        for (size_t kx = 0; kx < fx.weights[i].size(); ++kx) {
          const double weight = fy.weights[j][ky] * fx.weights[i][kx];
          const uint8_t* pixel = &src[(static_cast<size_t>(y) * w + fx.lo[i] + kx) * c];
          for (int ch = 0; ch < c; ++ch) out[(static_cast<size_t>(j) * ow + i) * c + ch] += weight * pixel[ch];
        }
      }
    }
  }
  return out;
}

// A flat image shrunk hundreds or thousands of times stays flat at every
// level: with each of the many taps' products rounded, their errors once
// added up past int16 and white wrapped to black; with each weight rounded
// on its own, the weights' sum missed 2^15 and levels came out one up.
TEST(ResampleBilinear, AFlatImageShrunkThousandsOfTimesStaysFlat) {
  for (auto [w, h] : {std::pair{20000, 2}, std::pair{200, 4000}, std::pair{3000, 2000}}) {
    std::vector<uint8_t> src(static_cast<size_t>(w) * h);
    for (int level : {1, 128, 167, 200, 251, 254, 255}) {
      std::fill(src.begin(), src.end(), static_cast<uint8_t>(level));
      for (auto [ow, oh] : {std::pair{1, 1}, std::pair{7, 2}, std::pair{3, 5}}) {
        std::vector<uint8_t> out(static_cast<size_t>(ow) * oh);
        ResampleBilinear(src.data(), w, h, 1, w, Window{0, 0, static_cast<double>(w), static_cast<double>(h)},
                         out.data(), ow, oh);
        for (uint8_t v : out) ASSERT_EQ(v, level) << w << "x" << h << " to " << ow << "x" << oh;
      }
    }
  }
}

// Flat areas (as a photo's sky or a page's white) with noise between them,
// at shrinks of 1.5 to 600 times (few taps, and more than
// kMostRoundedTaps), within a level of the filter in double. (Noise alone
// hides a rounding bias: its errors cancel out.)
TEST(ResampleBilinear, WithinALevelOfTheFilterInDoubleAtAnyShrink) {
  std::mt19937 random(7);
  for (auto [w, h, ow, oh] : {std::array{48, 30, 32, 20}, std::array{600, 90, 15, 3}, std::array{6000, 300, 10, 2},
                              std::array{3, 1200, 2, 3}}) {
    const int c = 3;
    std::vector<uint8_t> src(static_cast<size_t>(w) * h * c);
    for (size_t e = 0; e < src.size(); ++e) {
      constexpr uint8_t kFlat[] = {255, 250, 128, 0, 64};
      const int64_t x = e / c % w * 6 / w, y = e / c / w * 3 / h;
      src[e] = (x + y) % 6 == 5 ? static_cast<uint8_t>(random() % 256) : kFlat[(x + y) % 6];
    }
    std::vector<uint8_t> out(static_cast<size_t>(ow) * oh * c);
    ResampleBilinear(src.data(), w, h, c, int64_t{w} * c, Window{0, 0, static_cast<double>(w), static_cast<double>(h)},
                     out.data(), ow, oh);
    const std::vector<double> expected = ResizeInDouble(src, w, h, c, ow, oh);
    for (size_t e = 0; e < out.size(); ++e) {
      ASSERT_NEAR(out[e], expected[e], 1.0) << w << "x" << h << " to " << ow << "x" << oh << ", element " << e;
    }
  }
}

TEST(MakeTaps, EachOutputsWeightsSumToOneInQ15) {
  resample_internal::Taps t;
  resample_internal::MakeTaps(1.5, 37.0, 50, 11, /*inside=*/false, &t);
  ASSERT_EQ(t.first.size(), 11u);
  for (int i = 0; i < 11; ++i) {
    int sum = 0;
    for (int k = 0; k < t.taps; ++k) sum += t.weights[i * t.taps + k];
    EXPECT_NEAR(sum, resample_internal::kWeightOne, t.taps) << i;
    EXPECT_LE(t.first[i] + t.taps, 50);
  }
}

}  // namespace
}  // namespace sluice::kernels
