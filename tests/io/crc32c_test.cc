#include "sluice/io/crc32c.h"

#include <string>

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

TEST(Crc32c, MaskRoundTripsAndChangesTheValue) {
  for (uint32_t crc : {0u, 1u, 0xe3069283u, 0xffffffffu}) {
    EXPECT_EQ(UnmaskCrc(MaskCrc(crc)), crc);
    EXPECT_NE(MaskCrc(crc), crc);
  }
}

}  // namespace
}  // namespace sluice::io
