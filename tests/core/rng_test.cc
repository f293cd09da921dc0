#include "sluice/core/rng.h"

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

}  // namespace
}  // namespace sluice
