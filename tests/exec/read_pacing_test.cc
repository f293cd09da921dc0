// A map's runner pulls the next chunk early exactly when the other runners
// would otherwise run out of rows during the pull.
#include "sluice/exec/read_pacing.h"

#include "gtest/gtest.h"

namespace sluice::exec {
namespace {

TEST(ReadPacing, NeverPullsEarlyBeforeBothPullsAndRunsAreTimed) {
  ReadPacing pacing;
  EXPECT_FALSE(pacing.PullNow(0, 1, 256));
  pacing.Pulled(256, 256'000);
  EXPECT_FALSE(pacing.PullNow(0, 1, 256));
  ReadPacing ran_only;
  ran_only.Ran(32, 64'000);
  EXPECT_FALSE(ran_only.PullNow(0, 1, 256));
}

TEST(ReadPacing, PullsWhenTheOthersRowsEndBeforeAPullWould) {
  ReadPacing pacing;
  pacing.Pulled(256, 256'000);                // 1 us a row: a chunk's pull takes 256 us, twice that at worst
  pacing.Ran(32, 64'000);                     // 2 us a row
  EXPECT_TRUE(pacing.PullNow(256, 1, 256));   // 512 us of rows left: out as a slow pull ends
  EXPECT_FALSE(pacing.PullNow(257, 1, 256));  // the pull ends first
  EXPECT_TRUE(pacing.PullNow(512, 2, 256));   // two runners share the rows left
  EXPECT_FALSE(pacing.PullNow(513, 2, 256));
  EXPECT_FALSE(pacing.PullNow(1, 0, 256));  // no other runner to keep busy
}

TEST(ReadPacing, FollowsTheTimingsAsTheyChange) {
  ReadPacing pacing;
  pacing.Pulled(100, 100'000);  // 1 us a row
  pacing.Ran(100, 100'000);     // 1 us a row
  EXPECT_FALSE(pacing.PullNow(250, 1, 100));
  EXPECT_TRUE(pacing.PullNow(150, 1, 100));
  for (int i = 0; i < 100; ++i) pacing.Ran(100, 400'000);  // rows now take 4 us
  EXPECT_FALSE(pacing.PullNow(60, 1, 100));
  EXPECT_TRUE(pacing.PullNow(45, 1, 100));
  pacing.Ran(0, 1'000'000);  // no rows: no timing
  EXPECT_TRUE(pacing.PullNow(45, 1, 100));
}

}  // namespace
}  // namespace sluice::exec
