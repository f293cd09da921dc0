#include "sluice/core/rng.h"

#include <cmath>
#include <set>

#include "gtest/gtest.h"

namespace sluice {
namespace {

// Known-answer vectors of Philox4x32-10 from the Random123 distribution
// (kat_vectors).
TEST(Philox4x32, MatchesKnownAnswerVectors) {
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(SampleRng, IsAFunctionOfItsKey) {
  SampleRng a(7, OpKey("map_1", 2), 3, 12345);
  SampleRng b(7, OpKey("map_1", 2), 3, 12345);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.NextU32(), b.NextU32());
}

TEST(SampleRng, DiffersAcrossSeedOpEpochAndSample) {
  const uint32_t base = SampleRng(1, OpKey("m", 0), 0, 0).NextU32();
  EXPECT_NE(base, SampleRng(2, OpKey("m", 0), 0, 0).NextU32());
  EXPECT_NE(base, SampleRng(1, OpKey("m", 1), 0, 0).NextU32());
  EXPECT_NE(base, SampleRng(1, OpKey("m", 0), 1, 0).NextU32());
  EXPECT_NE(base, SampleRng(1, OpKey("m", 0), 0, 1).NextU32());
}

// A repeat's passes are numbered outer * 2^20 + i: outer epoch 4096 is
// 2^32 and must not draw as epoch 0 did.
TEST(SampleRng, EpochsApartByAMultipleOf2To32DrawAnew) {
  for (const uint64_t epoch : {uint64_t{0}, uint64_t{5}, uint64_t{1} << 20}) {
    SampleRng low(1, OpKey("m", 0), epoch, 9);
    SampleRng high(1, OpKey("m", 0), epoch + (uint64_t{1} << 32), 9);
    SampleRng higher(1, OpKey("m", 0), epoch + (uint64_t{3} << 32), 9);
    const uint32_t a = low.NextU32(), b = high.NextU32(), c = higher.NextU32();
    EXPECT_NE(a, b);
    EXPECT_NE(b, c);
  }
}

TEST(SampleRng, UniformStaysInRangeAndCoversIt) {
  float lo = 1, hi = 0;
  for (int s = 0; s < 10000; ++s) {
    const float u = SampleRng(3, 4, 5, s).Uniform(0.1f, 2.0f);
    ASSERT_GE(u, 0.1f);
    ASSERT_LT(u, 2.0f);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_LT(lo, 0.11f);
  EXPECT_GT(hi, 1.99f);
}

TEST(SampleRng, BernoulliIsRoughlyFair) {
  int heads = 0;
  for (int s = 0; s < 10000; ++s) heads += SampleRng(9, 1, 0, s).Bernoulli(0.5f);
  EXPECT_NEAR(heads, 5000, 300);  // > 6 standard deviations
}

// The moments of 20,000 draws, one sample's stream each, within 5
// standard errors of the distribution's (the variance's error taken from
// the fourth moment's bound for these shapes).
struct Moments {
  double mean = 0, var = 0;
};
template <typename Draw>
Moments Measure(Draw draw) {
  const int n = 20000;
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    SampleRng rng(3, OpKey("m", 0), 0, i);
    const double x = draw(rng);
    sum += x;
    sq += x * x;
  }
  Moments m;
  m.mean = sum / n;
  m.var = sq / n - m.mean * m.mean;
  return m;
}

TEST(SampleRng, GammaAndBetaHaveTheirDistributionsMoments) {
  for (double shape : {0.3, 1.0, 4.5}) {
    const Moments g = Measure([&](SampleRng& r) { return r.Gamma(shape); });
    const double se = std::sqrt(shape / 20000);
    EXPECT_NEAR(g.mean, shape, 5 * se) << "gamma " << shape;
    EXPECT_NEAR(g.var, shape, 5 * std::sqrt((6 * shape + 2 * shape * shape) / 20000)) << "gamma " << shape;
  }
  for (double a : {0.2, 1.0, 4.0}) {  // Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1))
    const Moments b = Measure([&](SampleRng& r) { return r.Beta(a, a); });
    const double var = 1 / (4 * (2 * a + 1));
    EXPECT_NEAR(b.mean, 0.5, 5 * std::sqrt(var / 20000)) << "beta " << a;
    EXPECT_NEAR(b.var, var, 5 * std::sqrt(0.0625 / 20000)) << "beta " << a;
  }
  const Moments z = Measure([](SampleRng& r) { return r.Normal(); });
  EXPECT_NEAR(z.mean, 0, 5 * std::sqrt(1.0 / 20000));
  EXPECT_NEAR(z.var, 1, 5 * std::sqrt(2.0 / 20000));
}

}  // namespace
}  // namespace sluice
