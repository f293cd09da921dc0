#include "sluice/io/crc32c.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::io {
namespace {

// Test vectors from RFC 3720, appendix B.4.
TEST(Crc32c, MatchesRfc3720Vectors) {
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<char>(i);
    down[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62a8ab43u);
  EXPECT_EQ(Crc32c(up.data(), up.size()), 0x46dd794eu);
  EXPECT_EQ(Crc32c(down.data(), down.size()), 0x113fdb5cu);
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
}

TEST(Crc32c, ExtendEqualsWhole) {
  const std::string s = "hello, sluice: a longer string that spans several words";
  const uint32_t whole = Crc32c(s.data(), s.size());
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(Crc32cExtend(Crc32c(s.data(), cut), s.data() + cut, s.size() - cut), whole);
  }
}

// One bit at a time, straight from the definition: the reference for the
// library's folding paths and their tails (lengths around its block sizes).
uint32_t BitwiseCrc32c(const std::vector<uint8_t>& data) {
  uint32_t crc = ~0u;
  for (uint8_t b : data) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
  }
  return ~crc;
}

TEST(Crc32c, LongBuffersMatchTheBitwiseDefinition) {
  std::mt19937 rng(7);
  for (size_t n : {767u, 768u, 769u, 12287u, 12288u, 12289u, 3u * 4096 * 5 + 3 * 256 + 13, 1u << 20}) {
    std::vector<uint8_t> data(n);
    for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
    EXPECT_EQ(Crc32c(data.data(), data.size()), BitwiseCrc32c(data)) << n << " bytes";
  }
}

TEST(Crc32c, CopyAndCrcCopiesEveryByteAndContinuesTheCrc) {
  std::vector<uint8_t> src(3 * 4096 * 2 + 100), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  const uint32_t head = Crc32c("head", 4);
  EXPECT_EQ(CopyAndCrc32c(head, dst.data(), src.data(), src.size()), Crc32cExtend(head, src.data(), src.size()));
  EXPECT_EQ(dst, src);
}

TEST(Crc32c, MaskRoundTripsAndChangesTheValue) {
  for (uint32_t crc : {0u, 1u, 0xe3069283u, 0xffffffffu}) {
    EXPECT_EQ(UnmaskCrc(MaskCrc(crc)), crc);
    EXPECT_NE(MaskCrc(crc), crc);
  }
}

}  // namespace
}  // namespace sluice::io
