// The resampler on its own: exact where a bilinear (triangle) filter is
// exact, and PIL's taps summing to one.
#include "sluice/kernels/resample.h"

#include <numeric>
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
