#include "sluice/kernels/value_loops.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::ops {
namespace {

using kernels::CopyBypassingCache;

// Every size around the streaming threshold (256 KiB) and around the 64-byte
// steps, at every alignment of either side, copies exactly its bytes and
// not one more.
TEST(CopyBypassingCache, CopiesExactlyTheBytesAtEveryAlignmentAndSize) {
  constexpr size_t kThreshold = 256 << 10;
  std::vector<uint8_t> src(kThreshold + 512);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
  const std::vector<size_t> sizes = {0,
                                     1,
                                     15,
                                     64,
                                     1000,
                                     kThreshold - 1,
                                     kThreshold,
                                     kThreshold + 1,
                                     kThreshold + 63,
                                     kThreshold + 64,
                                     kThreshold + 77};
  for (const size_t n : sizes) {
    for (size_t from = 0; from < 17; from += 4) {
      for (size_t to = 0; to < 17; ++to) {
        std::vector<uint8_t> dst(n + 64, 0xAB);
        CopyBypassingCache(dst.data() + to, src.data() + from, n);
        for (size_t i = 0; i < to; ++i) ASSERT_EQ(dst[i], 0xAB) << "before, n " << n << " to " << to;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(dst[to + i], src[from + i]) << "byte " << i << " of " << n << ", from " << from << " to " << to;
        }
        for (size_t i = to + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << "after, n " << n << " to " << to;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::ops
