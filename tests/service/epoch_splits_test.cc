#include "sluice/service/epoch_splits.h"

#include "gtest/gtest.h"

namespace sluice::service {
namespace {

constexpr int64_t kClientA = 1, kClientB = 2, kWorker1 = 11, kWorker2 = 12;

int64_t Take(EpochSplits& e, int64_t client, int64_t worker) {
  const GetSplitResponse r = e.Next(client, worker);
  EXPECT_EQ(r.state(), GetSplitResponse::SPLIT);
  return r.split();
}

TEST(EpochSplits, HandsOutInOrderWaitsOnSplitsInFlightAndEndsWhenAllArrived) {
  EpochSplits e({2, 0, 1});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 2);
  EXPECT_EQ(Take(e, kClientA, kWorker2), 0);
  EXPECT_EQ(Take(e, kClientA, kWorker1), 1);
  EXPECT_EQ(e.Next(kClientA, kWorker2).state(), GetSplitResponse::WAIT);
  e.Complete(2);
  e.Complete(0);
  e.Complete(0);  // a repeated report changes nothing
  EXPECT_EQ(e.completed(), 2);
  EXPECT_EQ(e.Next(kClientA, kWorker2).state(), GetSplitResponse::WAIT);
  e.Complete(1);
  EXPECT_TRUE(e.done());
  EXPECT_EQ(e.Next(kClientA, kWorker2).state(), GetSplitResponse::END);
}

TEST(EpochSplits, ALostWorkersSplitsAreRerunForTheirOwnClientOnly) {
  EpochSplits e({0, 1, 2, 3});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 0);
  EXPECT_EQ(Take(e, kClientB, kWorker1), 1);
  EXPECT_EQ(Take(e, kClientA, kWorker2), 2);
  e.WorkerLost(kWorker1);
  // Client B's re-run comes before the pool; A's split 0 stays A's.
  EXPECT_EQ(Take(e, kClientB, kWorker2), 1);
  EXPECT_EQ(Take(e, kClientB, kWorker2), 3);
  EXPECT_EQ(e.Next(kClientB, kWorker2).state(), GetSplitResponse::WAIT);  // 1 and 3 in flight
  EXPECT_EQ(Take(e, kClientA, kWorker2), 0);
  for (int s : {0, 1, 2, 3}) e.Complete(s);
  EXPECT_EQ(e.Next(kClientA, kWorker2).state(), GetSplitResponse::END);
}

TEST(EpochSplits, AnAbandonedSplitReturnsToItsClientAndALostClientsToThePool) {
  EpochSplits e({0, 1});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 0);
  e.Abandon(0, kClientB);  // not B's: ignored
  EXPECT_EQ(Take(e, kClientB, kWorker1), 1);
  EXPECT_EQ(e.Next(kClientB, kWorker1).state(), GetSplitResponse::WAIT);
  e.Abandon(0, kClientA);
  EXPECT_EQ(e.Next(kClientB, kWorker1).state(), GetSplitResponse::WAIT);  // 0 is A's
  e.ClientLost(kClientA);
  EXPECT_EQ(Take(e, kClientB, kWorker2), 0);
}

TEST(EpochSplits, AReplayedAssignmentTakesTheSplitOutOfThePool) {
  EpochSplits e({0, 1});
  e.Assign(1, kClientA, -1);
  EXPECT_EQ(Take(e, kClientB, kWorker1), 0);
  e.Complete(0);
  EXPECT_EQ(e.Next(kClientB, kWorker1).state(), GetSplitResponse::END);
  e.Abandon(1, kClientA);
  EXPECT_EQ(Take(e, kClientA, kWorker2), 1);
}

}  // namespace
}  // namespace sluice::service
