// BorderIndex against the reflections taken one step at a time (numpy's
// pad), and at positions far outside the axis, where stepping took as many
// steps as the position is far.
#include "sluice/kernels/border.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace sluice::kernels {
namespace {

int64_t Stepped(int64_t i, int64_t n, PadMode mode) {
  if (mode == PadMode::kReflect) {
    if (n == 1) return 0;
    while (i < 0 || i >= n) i = i < 0 ? -i : 2 * n - 2 - i;
  } else {
    while (i < 0 || i >= n) i = i < 0 ? -i - 1 : 2 * n - 1 - i;
  }
  return i;
}

TEST(BorderIndex, ReflectionsEqualTheStepByStepOnes) {
  for (PadMode mode : {PadMode::kReflect, PadMode::kSymmetric}) {
    for (int64_t n = 1; n <= 7; ++n) {
      for (int64_t i = -60; i <= 60; ++i) {
        EXPECT_EQ(BorderIndex(i, n, mode), Stepped(i, n, mode)) << "i " << i << " n " << n;
      }
    }
  }
}

TEST(BorderIndex, FarPositionsLandInsideTheAxis) {
  constexpr int64_t kFar[] = {1000000, -1000000, int64_t{1} << 50, std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::min() + 1};
  for (PadMode mode : {PadMode::kReflect, PadMode::kSymmetric}) {
    for (int64_t i : kFar) {
      const int64_t at = BorderIndex(i, 224, mode);
      EXPECT_GE(at, 0) << i;
      EXPECT_LT(at, 224) << i;
    }
  }
  EXPECT_EQ(BorderIndex(1000000, 224, PadMode::kReflect), Stepped(1000000, 224, PadMode::kReflect));
  EXPECT_EQ(BorderIndex(-1000000, 224, PadMode::kSymmetric), Stepped(-1000000, 224, PadMode::kSymmetric));
}

}  // namespace
}  // namespace sluice::kernels
