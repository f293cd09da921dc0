#include "sluice/placement/policy.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::placement {
namespace {

using ::testing::HasSubstr;

Placement InProcess(int threads) {
  Placement p;
  p.threads = threads;
  return p;
}

Levers AllLevers() {
  Levers l;
  l.threads = l.local_workers = l.gpu_tail = l.keep_prefix = true;
  return l;
}

// A window on `cores` cores: the job takes `rate` samples/s with the trainer
// waiting `wait` of its time; the trainer computes on `trainer_cores`, the
// engine on `engine_cores`, at `cpu_us` microseconds of compute a sample.
Measurements Window(const Placement& p, int cores, double rate, double wait, double trainer_cores, double engine_cores,
                    double cpu_us) {
  Measurements m;
  m.placement = p;
  m.seconds = 3;
  m.cores = cores;
  m.rate = rate;
  m.wait_share = wait;
  m.process_cores = trainer_cores + engine_cores;
  m.engine_cores = engine_cores;
  m.cpu_s_per_sample = cpu_us * 1e-6;
  m.memory_free_bytes = int64_t{1} << 30;
  m.worker_ring_bytes = int64_t{64} << 20;
  return m;
}

// `m` with a deterministic prefix of `share` of the compute, `bytes` to
// write, room for `room` on its disk, in a later epoch.
Measurements WithPrefix(Measurements m, double share, int64_t bytes, int64_t room) {
  m.prefix_share = share;
  m.prefix_bytes = bytes;
  m.prefix_room_bytes = room;
  m.epochs_repeat = true;
  return m;
}

// Every lever but the prefix and, where `threads`, the thread count.
Levers PrefixOnly(bool threads) {
  Levers l;
  l.threads = threads;
  l.local_workers = l.gpu_tail = false;
  l.keep_prefix = true;
  return l;
}

// Rates a placement on one window, so that each Observe below decides.
Policy::Options OneWindow() {
  Policy::Options o;
  o.measure_windows = 1;
  return o;
}

// Feeds the settling window, then `m`; returns the decision on `m`.
Decision AfterSettling(Policy* policy, const Measurements& m) {
  policy->Observe(m);
  return policy->Observe(m);
}

TEST(Policy, AFedTrainerWithNothingToGainStays) {
  Policy policy(InProcess(16), AllLevers(), OneWindow());
  // The trainer waits 1% and computes on 0.2 cores: nothing to free, nothing to speed up.
  const Decision d = AfterSettling(&policy, Window(InProcess(16), 16, 1000, 0.01, 0.2, 2, 2000));
  EXPECT_EQ(d.next, InProcess(16));
  EXPECT_THAT(d.reason, HasSubstr("stays in the trainer's process on 16 threads"));
  EXPECT_TRUE(policy.log().empty());
}

TEST(Policy, RaisesThreadsWhenTheTrainerWaitsAndCoresAreIdle) {
  Policy policy(InProcess(2), AllLevers(), OneWindow());
  // 2 of 8 cores at 1 ms a sample make 2,000/s; the trainer waits half its time.
  Decision d = AfterSettling(&policy, Window(InProcess(2), 8, 2000, 0.5, 0.3, 2, 1000));
  EXPECT_EQ(d.next.threads, 8);
  EXPECT_EQ(d.next.local_workers, 0);
  ASSERT_FALSE(d.alternatives.empty());
  EXPECT_NEAR(d.alternatives[0].predicted_rate, 4000, 1);  // capped by the trainer's 4,000/s
  EXPECT_THAT(d.reason, HasSubstr("moves to in the trainer's process on 8 threads"));
  policy.Observe(Window(d.next, 8, 3900, 0.02, 0.3, 4, 1000));  // settling
  d = policy.Observe(Window(d.next, 8, 3900, 0.02, 0.3, 4, 1000));
  EXPECT_EQ(d.next.threads, 8);
  EXPECT_FALSE(d.undo);
  EXPECT_THAT(policy.log().back(), HasSubstr("keeps in the trainer's process on 8 threads"));
}

TEST(Policy, LeavesAFedTrainerItsCoresAndKeepsThatUnlessItCosts) {
  Policy policy(InProcess(4), AllLevers(), OneWindow());
  // The trainer computes on 1.5 of 4 cores and waits 1%; 3 threads at
  // 500 us a sample make 5,000/s against the 1,000/s taken.
  Decision d = AfterSettling(&policy, Window(InProcess(4), 4, 1000, 0.01, 1.5, 0.5, 500));
  EXPECT_EQ(d.next.threads, 3);  // 4 - 1.5, rounded
  policy.Observe(Window(d.next, 4, 990, 0.01, 1.5, 0.5, 500));
  d = policy.Observe(Window(d.next, 4, 990, 0.01, 1.5, 0.5, 500));  // 1% lower: within the margin
  EXPECT_EQ(d.next.threads, 3);
  EXPECT_FALSE(d.undo);
}

TEST(Policy, DoesNotTakeThreadsAPipelineNeeds) {
  Policy policy(InProcess(4), AllLevers(), OneWindow());
  // Fed, but 3 threads at 3 ms a sample make 1,000/s: no margin over the 1,000/s taken.
  const Decision d = AfterSettling(&policy, Window(InProcess(4), 4, 1000, 0.01, 1.5, 3, 3000));
  EXPECT_EQ(d.next, InProcess(4));
}

TEST(Policy, TriesALocalWorkerWhenTheTrainerCompetesAndUndoesItWhenItLoses) {
  Policy policy(InProcess(16), AllLevers(), OneWindow());
  // Loader-bound on all 16 cores with the trainer on 2 of them.
  Decision d = AfterSettling(&policy, Window(InProcess(16), 16, 5000, 0.3, 2, 13, 2600));
  EXPECT_EQ(d.next.local_workers, 1);
  EXPECT_THAT(d.reason, HasSubstr("measured by trying"));
  policy.Observe(Window(d.next, 16, 4500, 0.35, 2, 1, 2600));
  d = policy.Observe(Window(d.next, 16, 4500, 0.35, 2, 1, 2600));
  EXPECT_TRUE(d.undo);
  EXPECT_EQ(d.next, InProcess(16));
  EXPECT_THAT(policy.log().back(), HasSubstr("undoes 1 local worker process"));
  // Undone, it is not tried again while the measurements hold.
  policy.Observe(Window(InProcess(16), 16, 5000, 0.3, 2, 13, 2600));
  d = policy.Observe(Window(InProcess(16), 16, 5000, 0.3, 2, 13, 2600));
  EXPECT_EQ(d.next, InProcess(16));
  // The trainer's rate changes by more than a quarter: rated again (its
  // windows may straddle the change), then worth a new try.
  d = policy.Observe(Window(InProcess(16), 16, 5000, 0.6, 2, 13, 2600));
  EXPECT_EQ(d.next, InProcess(16));
  EXPECT_THAT(d.reason, HasSubstr("rating the placement again"));
  d = policy.Observe(Window(InProcess(16), 16, 5000, 0.6, 2, 13, 2600));
  EXPECT_EQ(d.next.local_workers, 1);
}

TEST(Policy, KeepsALocalWorkerThatPays) {
  Policy policy(InProcess(16), AllLevers(), OneWindow());
  Decision d = AfterSettling(&policy, Window(InProcess(16), 16, 5000, 0.3, 2, 13, 2600));
  ASSERT_EQ(d.next.local_workers, 1);
  policy.Observe(Window(d.next, 16, 6500, 0.1, 2, 1, 2600));
  d = policy.Observe(Window(d.next, 16, 6500, 0.1, 2, 1, 2600));
  EXPECT_FALSE(d.undo);
  EXPECT_EQ(d.next.local_workers, 1);
}

TEST(Policy, NoWorkerProcessWithoutACoreForIt) {
  Policy policy(InProcess(2), AllLevers(), OneWindow());
  // 2 cores, the trainer on 0.8 of them: no two cores free for a worker process.
  const Decision d = AfterSettling(&policy, Window(InProcess(2), 2, 1000, 0.4, 0.8, 1.2, 1200));
  EXPECT_EQ(d.next.local_workers, 0);
}

Levers WithService() {
  Levers l = AllLevers();
  l.service_workers = true;
  return l;
}

TEST(Policy, TriesTheDispatchersWorkersWhenThisMachinesCoresAreSpent) {
  Policy policy(InProcess(2), WithService(), OneWindow());
  // 2 cores busy, the trainer waiting 40%: no core for a worker process here.
  Decision d = AfterSettling(&policy, Window(InProcess(2), 2, 1000, 0.4, 0.8, 1.2, 1200));
  EXPECT_TRUE(d.next.service_workers);
  EXPECT_EQ(d.next.local_workers, 0);
  EXPECT_THAT(d.reason, HasSubstr("moves to the dispatcher's workers"));
  EXPECT_THAT(d.reason, HasSubstr("autoscaling signal"));
  // It spends another machine's CPU: kept only when the job gains.
  policy.Observe(Window(d.next, 2, 1010, 0.4, 0.8, 0.1, 1200));
  d = policy.Observe(Window(d.next, 2, 1010, 0.4, 0.8, 0.1, 1200));
  EXPECT_TRUE(d.undo);
  EXPECT_EQ(d.next, InProcess(2));
}

TEST(Policy, KeepsTheDispatchersWorkersThatPayAndComesBackWhenTheJobChanges) {
  Policy policy(InProcess(2), WithService(), OneWindow());
  Decision d = AfterSettling(&policy, Window(InProcess(2), 2, 1000, 0.4, 0.8, 1.2, 1200));
  ASSERT_TRUE(d.next.service_workers);
  policy.Observe(Window(d.next, 2, 1600, 0.05, 0.8, 0.1, 1200));
  d = policy.Observe(Window(d.next, 2, 1600, 0.05, 0.8, 0.1, 1200));
  EXPECT_FALSE(d.undo);
  EXPECT_TRUE(d.next.service_workers);
  // The trainer slows by far more than a quarter (a heavier phase): rated
  // again, then the trainer's process is worth a new try.
  policy.Observe(Window(d.next, 2, 400, 0.01, 1.8, 0.1, 1200));
  d = policy.Observe(Window(d.next, 2, 400, 0.01, 1.8, 0.1, 1200));
  EXPECT_FALSE(d.next.service_workers);
  EXPECT_THAT(d.reason, HasSubstr("back in the trainer's process"));
}

TEST(Policy, ALostDispatcherSendsTheJobBackAndIsNotTriedAgainUntilTheJobChanges) {
  Policy policy(InProcess(2), WithService(), OneWindow());
  Decision d = AfterSettling(&policy, Window(InProcess(2), 2, 1000, 0.4, 0.8, 1.2, 1200));
  ASSERT_TRUE(d.next.service_workers);
  policy.LoseService("the dispatcher at h:1 has been unreachable for 1s");
  EXPECT_EQ(policy.current(), InProcess(2));
  EXPECT_FALSE(policy.judging());
  EXPECT_THAT(policy.log().back(), HasSubstr("the dispatcher's workers were lost (the dispatcher at h:1"));
  d = AfterSettling(&policy, Window(InProcess(2), 2, 1000, 0.4, 0.8, 1.2, 1200));
  EXPECT_FALSE(d.next.service_workers);
  // A new phase of the job: worth trying again.
  policy.Observe(Window(InProcess(2), 2, 2000, 0.4, 0.8, 1.2, 600));
  d = policy.Observe(Window(InProcess(2), 2, 2000, 0.4, 0.8, 1.2, 600));
  EXPECT_TRUE(d.next.service_workers);
}

TEST(Policy, NoDispatchersWorkersWithoutADispatcherOrWithTheKeptPrefix) {
  Policy without(InProcess(2), AllLevers(), OneWindow());
  EXPECT_FALSE(AfterSettling(&without, Window(InProcess(2), 2, 1000, 0.4, 0.8, 1.2, 1200)).next.service_workers);
  // The kept prefix lies on this machine's disk, where the workers cannot read it.
  Placement kept = InProcess(2);
  kept.keep_prefix = true;
  Policy with_prefix(kept, WithService(), OneWindow());
  EXPECT_FALSE(AfterSettling(&with_prefix, Window(kept, 2, 1000, 0.4, 0.8, 1.2, 1200)).next.service_workers);
  // Nor the prefix kept while the workers run the front.
  Placement served = InProcess(2);
  served.service_workers = true;
  Policy on_service(served, WithService(), OneWindow());
  const Decision d = AfterSettling(
      &on_service, WithPrefix(Window(served, 2, 1000, 0.4, 0.8, 0.2, 1200), 0.5, int64_t{1} << 20, int64_t{1} << 30));
  EXPECT_FALSE(d.next.keep_prefix);
}

TEST(Policy, NoWorkerProcessWhoseRingTheBudgetCannotHold) {
  Policy policy(InProcess(16), AllLevers(), OneWindow());
  Measurements m = Window(InProcess(16), 16, 5000, 0.3, 2, 13, 2600);
  m.memory_free_bytes = int64_t{32} << 20;  // a 64 MiB ring does not fit
  const Decision d = AfterSettling(&policy, m);
  EXPECT_EQ(d.next.local_workers, 0);
}

TEST(Policy, AUsersExplicitChoicesAreKept) {
  Levers none;  // threads given, a distribute node written, no GPU, no prefix
  none.threads = none.local_workers = false;
  Policy policy(InProcess(2), none, OneWindow());
  const Decision d = AfterSettling(&policy, Window(InProcess(2), 16, 1000, 0.6, 2, 2, 2000));
  EXPECT_EQ(d.next, InProcess(2));
}

TEST(Policy, MovesTheTailToTheGpuOnlyWhenItIsAvailableAndWorthIt) {
  Measurements m = Window(InProcess(8), 8, 2000, 0.5, 0.5, 7.5, 3750);
  m.gpu_tail_share = 0.6;
  Levers no_gpu = AllLevers();
  no_gpu.gpu_tail = false;
  Policy without(InProcess(8), no_gpu, OneWindow());
  EXPECT_FALSE(AfterSettling(&without, m).next.gpu_tail);
  Policy with(InProcess(8), AllLevers(), OneWindow());
  const Decision d = AfterSettling(&with, m);
  EXPECT_TRUE(d.next.gpu_tail);
  EXPECT_NEAR(d.alternatives[0].predicted_rate, 4000, 1);  // 2,000 / 0.4, capped by the trainer's 4,000
  m.gpu_tail_share = 0.1;
  Policy small(InProcess(8), AllLevers(), OneWindow());
  EXPECT_FALSE(AfterSettling(&small, m).next.gpu_tail);
}

TEST(Policy, KeepsThePrefixOnlyWhenEpochsRepeatAndItFitsOnHalfTheDisk) {
  Measurements m =
      WithPrefix(Window(InProcess(8), 8, 2000, 0.5, 0.5, 7.5, 3750), 0.5, int64_t{512} << 20, int64_t{2} << 30);
  m.epochs_repeat = false;
  const Levers prefix_only = PrefixOnly(true);
  Policy first_epoch(InProcess(8), prefix_only, OneWindow());
  EXPECT_FALSE(AfterSettling(&first_epoch, m).next.keep_prefix);
  m.epochs_repeat = true;
  Policy later(InProcess(8), prefix_only, OneWindow());
  const Decision d = AfterSettling(&later, m);
  EXPECT_TRUE(d.next.keep_prefix);
  EXPECT_THAT(d.reason, HasSubstr("537 MB to write once, 2147 MB free on its disk"));
  m.prefix_bytes = (int64_t{1} << 30) + 1;  // more than half the room: the disk is left its other half
  Policy too_big(InProcess(8), prefix_only, OneWindow());
  EXPECT_FALSE(AfterSettling(&too_big, m).next.keep_prefix);
}

TEST(Policy, KeepsThePrefixForAFedTrainerThatComputesAndKeepsItUnlessItCosts) {
  // Fed (waits 1%), the trainer on a whole core beside 1 of the engine's.
  const Measurements m =
      WithPrefix(Window(InProcess(2), 2, 60000, 0.01, 1.0, 1.0, 16), 0.3, int64_t{150} << 20, int64_t{1} << 30);
  Policy policy(InProcess(2), PrefixOnly(false), OneWindow());
  const Decision d = AfterSettling(&policy, m);
  ASSERT_TRUE(d.next.keep_prefix);
  EXPECT_THAT(d.reason, HasSubstr("the trainer is fed (waits 1%) and computes on 1.0 cores"));
  EXPECT_NEAR(d.alternatives[0].predicted_rate, 60000, 1);  // the same rate, for less CPU
  // Judged as a move that frees CPU: 2% slower is within the noise, kept.
  Measurements after = m;
  after.placement = d.next;
  after.rate = 58800;
  EXPECT_TRUE(AfterSettling(&policy, after).next.keep_prefix);
  // With the thread count free too, the prefix comes first: fewer threads
  // spread the same work thinner.
  const Measurements cheap =
      WithPrefix(Window(InProcess(2), 2, 60000, 0.01, 1.0, 0.5, 8), 0.3, int64_t{150} << 20, int64_t{1} << 30);
  Policy both(InProcess(2), PrefixOnly(true), OneWindow());
  const Decision first = AfterSettling(&both, cheap);
  ASSERT_EQ(first.alternatives.size(), 2u);  // the engine on half a core: 1 thread makes 120,000 samples/s
  Placement kept = InProcess(2);
  kept.keep_prefix = true;
  EXPECT_EQ(first.next, kept);
  // A trainer that computes on a fifth of a core gains nothing from it.
  Measurements idle = m;
  idle.process_cores = 1.2;
  Policy stays(InProcess(2), PrefixOnly(false), OneWindow());
  EXPECT_FALSE(AfterSettling(&stays, idle).next.keep_prefix);
}

TEST(Policy, APrefixThatCouldNotBeKeptIsNeverTriedAgain) {
  Measurements m =
      WithPrefix(Window(InProcess(8), 8, 2000, 0.5, 0.5, 7.5, 3750), 0.5, int64_t{1} << 20, int64_t{1} << 30);
  Policy policy(InProcess(8), PrefixOnly(true), OneWindow());
  ASSERT_TRUE(AfterSettling(&policy, m).next.keep_prefix);
  policy.Withdraw("the disk is full");
  EXPECT_EQ(policy.current(), InProcess(8));
  EXPECT_FALSE(policy.levers().keep_prefix);
  EXPECT_THAT(policy.log().back(), HasSubstr("refused: the disk is full"));
  // The trainer's rate changes (every move may be tried again), and the
  // same windows call for the prefix: it stays where it is.
  m.rate = 4000;
  AfterSettling(&policy, m);
  EXPECT_FALSE(AfterSettling(&policy, m).next.keep_prefix);
}

TEST(Policy, IgnoresTheWindowAfterEachMove) {
  Policy policy(InProcess(2), AllLevers(), OneWindow());
  const Measurements loader_bound = Window(InProcess(2), 8, 2000, 0.5, 0.3, 2, 1000);
  EXPECT_EQ(policy.Observe(loader_bound).next, InProcess(2));  // start-up
  const Decision d = policy.Observe(loader_bound);
  ASSERT_EQ(d.next.threads, 8);
  // A bad first window after the move is start-up, not a verdict.
  EXPECT_FALSE(policy.Observe(Window(d.next, 8, 10, 0.99, 0.3, 0.1, 1000)).undo);
  EXPECT_FALSE(policy.Observe(Window(d.next, 8, 3900, 0.02, 0.3, 4, 1000)).undo);
}

TEST(Policy, RatesAPlacementOnTheMeanOfItsWindows) {
  Policy policy(InProcess(4), AllLevers());  // two windows a rating
  const Measurements fed = Window(InProcess(4), 4, 1000, 0.01, 1.5, 0.5, 500);
  policy.Observe(fed);                                // start-up
  EXPECT_EQ(policy.Observe(fed).next, InProcess(4));  // one window: still measuring
  const Decision d = policy.Observe(fed);             // the second: a decision
  ASSERT_EQ(d.next.threads, 3);
  EXPECT_TRUE(policy.judging());
  policy.Observe(Window(d.next, 4, 10, 0.01, 1.5, 0.5, 500));  // start-up of the move
  // 1,200/s, then 700/s: the mean, 950/s, is 5% below the 1,000/s before:
  // undone. The first window alone would have kept the move.
  EXPECT_FALSE(policy.Observe(Window(d.next, 4, 1200, 0.01, 1.5, 0.5, 500)).undo);
  EXPECT_TRUE(policy.Observe(Window(d.next, 4, 700, 0.01, 1.5, 0.5, 500)).undo);
  EXPECT_FALSE(policy.judging());
}

TEST(Policy, AveragesWindowsByTheirLength) {
  Measurements a = Window(InProcess(2), 2, 1000, 0.2, 0.5, 1, 1000);
  Measurements b = Window(InProcess(2), 2, 4000, 0.6, 0.5, 1, 1000);
  a.seconds = 3;
  b.seconds = 1;
  const Measurements mean = Average({a, b});
  EXPECT_DOUBLE_EQ(mean.seconds, 4);
  EXPECT_DOUBLE_EQ(mean.rate, (1000 * 3 + 4000 * 1) / 4.0);
  EXPECT_DOUBLE_EQ(mean.wait_share, (0.2 * 3 + 0.6 * 1) / 4.0);
  EXPECT_DOUBLE_EQ(mean.cpu_s_per_sample, 1.0 * 4 / 7000);
}

}  // namespace
}  // namespace sluice::placement
