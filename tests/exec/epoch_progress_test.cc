// An epoch's split order is one function of (seed, source, epoch), drawn once
// per epoch; a repeat's seams tell which of its epochs a row is in.
#include "sluice/exec/epoch_progress.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::exec {
namespace {

TEST(ShuffledSplitOrder, IsAPermutationThatDependsOnSeedSourceAndEpoch) {
  const std::vector<int64_t> a = ShuffledSplitOrder(50, 7, "src", 0);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(50);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_EQ(a, ShuffledSplitOrder(50, 7, "src", 0));
  EXPECT_NE(a, ShuffledSplitOrder(50, 8, "src", 0));
  EXPECT_NE(a, ShuffledSplitOrder(50, 7, "other", 0));
  EXPECT_NE(a, ShuffledSplitOrder(50, 7, "src", 1));
}

TEST(SplitOrders, AnEpochsOrderIsMadeOnceAndShared) {
  int made = 0;
  SplitOrders orders([&made](uint64_t epoch) {
    ++made;
    return std::vector<io::Split>(epoch + 1);
  });
  const auto first = orders.Get(3);
  EXPECT_EQ(first->size(), 4u);
  EXPECT_EQ(orders.Get(3), first);
  EXPECT_EQ(made, 1);
  orders.Get(4);
  EXPECT_EQ(made, 2);
}

TEST(RepeatSeams, ARowBelongsToTheLastEpochStartedBeforeIt) {
  RepeatSeams seams;
  seams.Add(0, 0);
  seams.Add(10, 1);
  seams.Add(25, 2);
  EXPECT_EQ(seams.Find(3), 0);
  EXPECT_EQ(seams.Find(10), 1);
  EXPECT_EQ(seams.Find(24), 1);
  EXPECT_EQ(seams.Find(30), 2);
}

TEST(RepeatEpoch, EveryOuterAndInnerEpochHasItsOwnNumber) {
  EXPECT_NE(RepeatEpoch(0, 1), RepeatEpoch(1, 0));
  EXPECT_EQ(RepeatEpoch(2, 3), 2 * kRepeatEpochStride + 3);
}

}  // namespace
}  // namespace sluice::exec
