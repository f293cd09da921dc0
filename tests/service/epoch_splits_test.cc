#include "sluice/service/epoch_splits.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace sluice::service {
namespace {

constexpr int64_t kClientA = 1, kClientB = 2, kWorker1 = 11, kWorker2 = 12;

int64_t Take(EpochSplits& e, int64_t client, int64_t worker) {
  const GetSplitResponse r = e.Next({client, worker});
  EXPECT_EQ(r.state(), GetSplitResponse::SPLIT);
  return r.split();
}

TEST(EpochSplits, HandsOutInOrderWaitsOnSplitsInFlightAndEndsWhenAllArrived) {
  EpochSplits e({2, 0, 1});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 2);
  EXPECT_EQ(Take(e, kClientA, kWorker2), 0);
  EXPECT_EQ(Take(e, kClientA, kWorker1), 1);
  EXPECT_EQ(e.Next({kClientA, kWorker2}).state(), GetSplitResponse::WAIT);
  e.Complete(2);
  e.Complete(0);
  e.Complete(0);  // a repeated report changes nothing
  EXPECT_EQ(e.completed(), 2);
  EXPECT_EQ(e.Next({kClientA, kWorker2}).state(), GetSplitResponse::WAIT);
  e.Complete(1);
  EXPECT_TRUE(e.done());
  EXPECT_EQ(e.Next({kClientA, kWorker2}).state(), GetSplitResponse::END);
}

// Splits of small rows fit by dozens into a stream's buffers: the first
// consumer of a shared job took nearly all of an epoch before the second
// asked.
TEST(EpochSplits, AClientAheadOfAnotherThatAsksWaitsWhileThePoolServesTheOther) {
  std::vector<int64_t> order(40);
  for (int64_t i = 0; i < 40; ++i) order[i] = i;
  EpochSplits e(order);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, t0}).state(), GetSplitResponse::SPLIT);
  // B asks: it is served, and A, 4 ahead of it, waits.
  EXPECT_EQ(e.Next({kClientB, kWorker1, 0, 0, t0}).state(), GetSplitResponse::SPLIT);
  EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, t0}).state(), GetSplitResponse::WAIT);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(e.Next({kClientB, kWorker2, 0, 0, t0}).state(), GetSplitResponse::SPLIT);
  EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, t0}).state(), GetSplitResponse::SPLIT);  // 10 against 7
  // A finishing splits takes again; B silent past a second holds no one back.
  e.Complete(0, kClientA);
  e.Complete(1, kClientA);
  EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, t0}).state(), GetSplitResponse::SPLIT);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, t0 + absl::Seconds(2)}).state(), GetSplitResponse::SPLIT);
  }
}

TEST(EpochSplits, AClientAloneOrAmongLostOnesIsNeverHeldBack) {
  std::vector<int64_t> order(20);
  for (int64_t i = 0; i < 20; ++i) order[i] = i;
  EpochSplits e(order);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(e.Next({kClientB, kWorker1, 0, 0, t0}).state(), GetSplitResponse::SPLIT);
  e.ClientLost(kClientB);  // its split back to the pool
  for (int i = 0; i < 20; ++i) EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, t0}).state(), GetSplitResponse::SPLIT);
  EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, t0}).state(), GetSplitResponse::WAIT);  // all in flight
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
  EXPECT_EQ(e.Next({kClientB, kWorker2}).state(), GetSplitResponse::WAIT);  // 1 and 3 in flight
  EXPECT_EQ(Take(e, kClientA, kWorker2), 0);
  for (int s : {0, 1, 2, 3}) e.Complete(s);
  EXPECT_EQ(e.Next({kClientA, kWorker2}).state(), GetSplitResponse::END);
}

TEST(EpochSplits, AnAbandonedSplitReturnsToItsClientAndALostClientsToThePool) {
  EpochSplits e({0, 1});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 0);
  e.Abandon(0, kClientB);  // not B's: ignored
  EXPECT_EQ(Take(e, kClientB, kWorker1), 1);
  EXPECT_EQ(e.Next({kClientB, kWorker1}).state(), GetSplitResponse::WAIT);
  e.Abandon(0, kClientA);
  EXPECT_EQ(e.Next({kClientB, kWorker1}).state(), GetSplitResponse::WAIT);  // 0 is A's
  e.ClientLost(kClientA);
  EXPECT_EQ(Take(e, kClientB, kWorker2), 0);
}

// A client that left the epoch's loop: what it held goes to the others,
// a late ask of one of its streams gets nothing, a split it abandons
// afterwards goes to the pool, and a resume makes it a reader again.
TEST(EpochSplits, AClientThatLeftTheEpochIsHandedNothingAndWhatItDropsGoesToThePool) {
  EpochSplits e({0, 1, 2, 3});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 0);
  e.ClientLeft(kClientA);
  EXPECT_EQ(e.Next({kClientA, kWorker1}).state(), GetSplitResponse::END) << "a cancelled stream's late ask";
  EXPECT_EQ(Take(e, kClientB, kWorker2), 0);
  e.Assign(1, kClientA, kWorker1);  // a replayed assignment of the leaver's
  e.Abandon(1, kClientA);
  EXPECT_EQ(Take(e, kClientB, kWorker2), 1);
  e.Resume(kClientA, {}, {}, {});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 2);
}

TEST(EpochSplits, AReplayedAssignmentTakesTheSplitOutOfThePool) {
  EpochSplits e({0, 1});
  e.Assign(1, kClientA, -1);
  EXPECT_EQ(Take(e, kClientB, kWorker1), 0);
  e.Complete(0);
  EXPECT_EQ(e.Next({kClientB, kWorker1}).state(), GetSplitResponse::WAIT);
  e.Abandon(1, kClientA);
  EXPECT_EQ(Take(e, kClientA, kWorker2), 1);
}

TEST(EpochSplits, AClientEndsOnlyOnceEverySplitArrivedSoADeadClientsSplitsFindAnother) {
  EpochSplits e({0, 1});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 0);
  EXPECT_EQ(Take(e, kClientB, kWorker2), 1);
  e.Complete(1);
  EXPECT_EQ(e.Next({kClientB, kWorker2}).state(), GetSplitResponse::WAIT) << "A holds split 0";
  e.ClientLost(kClientA);  // killed: its split goes to B
  EXPECT_EQ(Take(e, kClientB, kWorker2), 0);
  e.Complete(0);
  EXPECT_EQ(e.Next({kClientB, kWorker2}).state(), GetSplitResponse::END);
}

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(EpochSplits, ARetriedRequestGetsTheSameSplitAndOrphansNone) {
  EpochSplits e({0, 1, 2});
  const EpochSplits::Ask ask{kClientA, kWorker1, /*stream=*/77, /*seq=*/1, kT0};
  EXPECT_EQ(e.Next(ask).split(), 0);
  EXPECT_EQ(e.Next(ask).split(), 0) << "the reply was lost; the retry must not hand out split 1";
  EpochSplits::Ask next = ask;
  next.seq = 2;
  EXPECT_EQ(e.Next(next).split(), 1);
  EpochSplits::Ask other = ask;
  other.stream = 78;
  EXPECT_EQ(e.Next(other).split(), 2) << "another stream's seq 1 is another request";
}

TEST(EpochSplits, ARetriedWaitLooksAgain) {
  EpochSplits e({0});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 0);
  const EpochSplits::Ask ask{kClientA, kWorker2, /*stream=*/77, /*seq=*/1, kT0};
  EXPECT_EQ(e.Next(ask).state(), GetSplitResponse::WAIT);
  e.WorkerLost(kWorker1);
  const GetSplitResponse again = e.Next(ask);
  EXPECT_EQ(again.state(), GetSplitResponse::SPLIT) << "a WAIT must not be replayed to its retry";
  EXPECT_EQ(again.split(), 0);
}

SplitPolicy TenSecondLease() {
  SplitPolicy policy;
  policy.lease = absl::Seconds(10);
  return policy;
}

TEST(EpochSplits, ASplitWhoseLeaseRunsOutRunsAgainForItsClient) {
  EpochSplits e({0, 1}, TenSecondLease());
  EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, kT0}).split(), 0);
  EXPECT_EQ(e.Next({kClientA, kWorker2, 0, 0, kT0}).split(), 1);
  e.Renew(0, kClientA, kWorker1, /*batches=*/3, false, kT0 + absl::Seconds(8));  // worker 1 still runs split 0
  e.ExpireLeases(kT0 + absl::Seconds(15));
  // Split 1's stream broke and the report was lost: it comes back; 0 does not.
  const GetSplitResponse again = e.Next({kClientA, kWorker1, 0, 0, kT0 + absl::Seconds(15)});
  EXPECT_EQ(again.state(), GetSplitResponse::SPLIT);
  EXPECT_EQ(again.split(), 1);
  EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, kT0 + absl::Seconds(15)}).state(), GetSplitResponse::WAIT);
}

// A worker reporting a split without progress (stuck in a kernel) renews
// nothing: the split runs again elsewhere once its lease is out.
TEST(EpochSplits, OnlyProgressRenewsALease) {
  EpochSplits e({0}, TenSecondLease());
  constexpr uint64_t kStream = 77;
  EXPECT_EQ(e.Next({kClientA, kWorker1, kStream, 0, kT0}).split(), 0);
  e.Renew(0, kClientA, kWorker1, /*batches=*/0, false, kT0 + absl::Seconds(5));                       // started
  for (int t = 6; t <= 14; t += 2) e.Renew(0, kClientA, kWorker1, 0, false, kT0 + absl::Seconds(t));  // stuck
  // The stream it was stuck on is named, for its client to drop: it would
  // ask for no other split.
  const std::vector<EpochSplits::ExpiredStream> expired = e.ExpireLeases(kT0 + absl::Seconds(16));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].split, 0);
  EXPECT_EQ(expired[0].client, kClientA);
  EXPECT_EQ(expired[0].worker, kWorker1);
  EXPECT_EQ(expired[0].stream, kStream);
  const GetSplitResponse again = e.Next({kClientA, kWorker2, 0, 0, kT0 + absl::Seconds(16)});
  EXPECT_EQ(again.state(), GetSplitResponse::SPLIT);
  EXPECT_EQ(again.split(), 0) << "stuck since 5 s, the lease of 10 s ran out at 15 s";
}

// A split waiting for its client to take a batch (a slow or pausing
// consumer) is alive however long it waits: a consumer at a batch a second
// failed its epoch with DataLoss after three lease expiries.
TEST(EpochSplits, ASplitWaitingForItsClientKeepsItsLease) {
  EpochSplits e({0, 1}, TenSecondLease());
  EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, kT0}).split(), 0);
  for (int t = 5; t <= 60; t += 5) e.Renew(0, kClientA, kWorker1, /*batches=*/4, true, kT0 + absl::Seconds(t));
  EXPECT_TRUE(e.ExpireLeases(kT0 + absl::Seconds(65)).empty());
  const GetSplitResponse next = e.Next({kClientA, kWorker2, 0, 0, kT0 + absl::Seconds(65)});
  EXPECT_EQ(next.split(), 1) << "split 0 still runs on worker 1";
  EXPECT_EQ(e.Next({kClientA, kWorker2, 0, 0, kT0 + absl::Seconds(65)}).state(), GetSplitResponse::WAIT);
}

// A split sent whole waits for its client to read it (in the epoch's order,
// behind other workers' splits): no lease runs out on it, however long; a
// report of it, or of its stream breaking, settles it.
TEST(EpochSplits, ASplitSentWholeWaitsForItsClientWithoutALease) {
  EpochSplits e({0, 1}, TenSecondLease());
  EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, kT0}).split(), 0);
  EXPECT_EQ(e.Next({kClientA, kWorker1, 0, 0, kT0}).split(), 1);
  e.Sent(0, kClientA, kWorker1);
  e.Sent(1, kClientB, kWorker1);  // another client's: ignored
  const std::vector<EpochSplits::ExpiredStream> expired = e.ExpireLeases(kT0 + absl::Minutes(5));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].split, 1);
}

TEST(EpochSplits, ASplitThatBreaksTooOftenIsHandedOutAsFailedNamingWhy) {
  SplitPolicy policy;
  policy.max_failures = 3;
  EpochSplits e({0, 1}, policy);
  EXPECT_EQ(Take(e, kClientA, kWorker1), 0);
  e.Abandon(0, kClientA, /*why=*/"");  // a dispatcher restart is not the split's failure
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Take(e, kClientA, kWorker1), 0) << "try " << i;
    e.WorkerLost(kWorker1);
  }
  const GetSplitResponse failed = e.Next({kClientA, kWorker2});
  EXPECT_EQ(failed.state(), GetSplitResponse::FAILED);
  EXPECT_EQ(failed.split(), 0);
  EXPECT_EQ(failed.error(),
            "split 0 failed 3 times (worker 11 was lost while running it): a sample in it may "
            "crash the pipeline");
  e.Complete(0);  // skipped by the client
  EXPECT_EQ(Take(e, kClientA, kWorker2), 1);
}

// The client dropped a stream after its worker had taken the next split:
// that split runs again for the client at once, not when its lease runs
// out, and its failures stay as they were.
TEST(EpochSplits, ASplitWhoseStreamWasDroppedRunsAgainAtOnceCountingNoFailure) {
  SplitPolicy policy;
  policy.max_failures = 1;
  EpochSplits e({0, 1}, policy);
  EXPECT_EQ(Take(e, kClientA, kWorker1), 0);
  e.Dropped(0, kClientB, kWorker1);  // not its client's
  e.Dropped(0, kClientA, kWorker2);  // not its worker's
  EXPECT_EQ(Take(e, kClientA, kWorker1), 1) << "0 is still in flight";
  e.Dropped(0, kClientA, kWorker1);
  const GetSplitResponse again = e.Next({kClientA, kWorker2});
  EXPECT_EQ(again.state(), GetSplitResponse::SPLIT) << "no failure counted (1 would fail it)";
  EXPECT_EQ(again.split(), 0);
  e.Complete(0, kClientA);
  e.Dropped(0, kClientA, kWorker2);  // a report late: the split arrived
  e.Complete(1, kClientA);
  EXPECT_EQ(e.Next({kClientA, kWorker2}).state(), GetSplitResponse::END);
}

// A worker sent splits 0 and 1 whole into a stream its client dropped
// after a damaged message in 0: 0 counts its failure, 1 (never read) runs
// again at once counting none, the client's other stream keeps its own, and
// the ended stream gets no more.
TEST(EpochSplits, AnEndedStreamsSplitsRunAgainAtOnceAndOnlyThatStreams) {
  SplitPolicy policy;
  policy.max_failures = 1;
  EpochSplits e({0, 1, 2, 3}, policy);
  constexpr uint64_t kStream = 7, kOtherStream = 8;
  EXPECT_EQ(e.Next({kClientA, kWorker1, kStream, 1}).split(), 0);
  EXPECT_EQ(e.Next({kClientA, kWorker1, kStream, 2}).split(), 1);
  EXPECT_EQ(e.Next({kClientA, kWorker1, kOtherStream, 1}).split(), 2);
  e.StreamEnded(kStream, kClientB, "");  // not its client's
  EXPECT_EQ(Take(e, kClientA, kWorker2), 3) << "nothing came back";
  e.Abandon(0, kClientA, "arrived damaged");
  e.StreamEnded(kStream, kClientA, /*why=*/"");  // dropped by the client
  e.StreamEnded(kStream, kClientA);              // a repeated report changes nothing
  EXPECT_EQ(e.Next({kClientA, kWorker1, kStream, 3}).state(), GetSplitResponse::END)
      << "the ended stream's worker, asking on, gets nothing to send into it";
  EXPECT_EQ(e.Next({kClientA, kWorker1, kStream, 2}).state(), GetSplitResponse::END)
      << "nor does a retry of a request it had an answer to";
  EXPECT_EQ(e.Next({kClientA, kWorker2}).state(), GetSplitResponse::FAILED) << "0 failed once";
  const GetSplitResponse again = e.Next({kClientA, kWorker2, kOtherStream + 1, 1});
  EXPECT_EQ(again.state(), GetSplitResponse::SPLIT) << "no failure counted for 1";
  EXPECT_EQ(again.split(), 1);
  EXPECT_EQ(e.Next({kClientA, kWorker2}).state(), GetSplitResponse::WAIT) << "2 stays on its own stream";
  // The ended stream's worker reports its run of 1 dropped late: the newer
  // run on another stream of the same worker is not touched.
  e.Dropped(1, kClientA, kWorker2, kStream);
  e.Complete(0, kClientA);
  e.Complete(2, kClientA);
  e.Complete(3, kClientA);
  EXPECT_EQ(e.Next({kClientA, kWorker2}).state(), GetSplitResponse::WAIT) << "1 is still in flight";
  e.Complete(1, kClientA);
  EXPECT_EQ(e.Next({kClientA, kWorker2}).state(), GetSplitResponse::END);
}

// A stream that broke under its client (the worker died in a split that
// crashes it, before the client saw a row of it): the split counts a failure.
TEST(EpochSplits, ABrokenStreamsSplitsCountAFailure) {
  SplitPolicy policy;
  policy.max_failures = 1;
  EpochSplits e({0, 1}, policy);
  EXPECT_EQ(e.Next({kClientA, kWorker1, /*stream=*/7, 1}).split(), 0);
  e.StreamEnded(7, kClientA);
  const GetSplitResponse failed = e.Next({kClientA, kWorker2});
  EXPECT_EQ(failed.state(), GetSplitResponse::FAILED);
  EXPECT_EQ(failed.split(), 0);
  EXPECT_EQ(failed.error(), "split 0 failed 1 time (its stream broke): a sample in it may crash the pipeline");
}

// A consumer resumed from a state saved after splits 0 and 1 (and some of
// 2): what its killed earlier client finished or held since runs again.
TEST(EpochSplits, AResumedClientGetsWhatItsStateLacksWhateverItsEarlierClientDid) {
  constexpr int64_t kResumed = 3;
  EpochSplits e({0, 1, 2, 3, 4, 5});
  for (int64_t s : {0, 1, 2, 3}) EXPECT_EQ(Take(e, kClientA, kWorker1), s);
  EXPECT_EQ(Take(e, kClientB, kWorker2), 4);
  for (int64_t s : {0, 1, 3}) e.Complete(s, kClientA);  // 3: after the state was saved
  e.Complete(4, kClientB);
  e.Resume(kResumed, /*previous=*/{kClientA, kResumed}, /*done=*/{0, 1}, /*partial=*/{{2, 40}});
  EXPECT_EQ(e.completed(), 3);  // 0, 1 and B's 4
  EXPECT_TRUE(e.MayComplete(2, kResumed));
  // The partial split comes first, for the resumed client alone; then 3
  // (back in the pool) and 5.
  EXPECT_EQ(e.Next({kClientB, kWorker2}).split(), 3);
  const GetSplitResponse partial = e.Next({kResumed, kWorker1});
  EXPECT_EQ(partial.split(), 2);
  EXPECT_EQ(partial.first_record(), 40);  // its records before were done
  EXPECT_EQ(Take(e, kResumed, kWorker1), 5);
  for (int64_t s : {2, 3, 5}) e.Complete(s, kResumed);
  EXPECT_TRUE(e.done());
}

// Without a known earlier client (a new job), the state's done splits are
// done and the rest are the pool's.
TEST(EpochSplits, AResumeIntoANewEpochSkipsTheStatesDoneSplits) {
  EpochSplits e({3, 2, 1, 0});
  EXPECT_EQ(Take(e, kClientA, kWorker1), 3);  // held by the client itself, named twice below
  e.Resume(kClientA, /*previous=*/{kClientA, kClientA}, /*done=*/{1}, /*partial=*/{});
  EXPECT_EQ(e.completed(), 1);
  EXPECT_EQ(Take(e, kClientA, kWorker1), 3);  // back in the pool, once
  EXPECT_EQ(Take(e, kClientA, kWorker1), 2);
  EXPECT_EQ(Take(e, kClientA, kWorker1), 0);
  EXPECT_EQ(e.Next({kClientA, kWorker1}).state(), GetSplitResponse::WAIT);
}

}  // namespace
}  // namespace sluice::service
