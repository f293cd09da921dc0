#include "sluice/exec/autotune.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::exec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A map's parallelism (1..4) and a prefetch's depth (1..8).
std::vector<Knob> MapAndPrefetch(int64_t parallelism, int64_t depth, int64_t bytes_per_element = 0) {
  return {Knob{Knob::Kind::kParallelism, 1, "map_1", parallelism, 1, 4, 0},
          Knob{Knob::Kind::kDepth, 2, "prefetch_2", depth, 1, 8, bytes_per_element}};
}

std::vector<int64_t> Values(const std::vector<Knob>& knobs) {
  std::vector<int64_t> v;
  for (const Knob& k : knobs) v.push_back(k.value);
  return v;
}

// Feeds `n` intervals of one rate and pressure; returns the last setting.
std::vector<int64_t> Feed(Autotuner* tuner, int n, double rate, std::vector<double> pressure) {
  std::vector<int64_t> values;
  for (int i = 0; i < n; ++i) values = Values(tuner->Step(Interval{rate, pressure}));
  return values;
}

Autotuner::Options Opts() {
  Autotuner::Options o;
  o.settle_intervals = 1;
  o.measure_intervals = 2;
  o.min_gain = 0.03;
  return o;
}

TEST(Autotuner, RaisesTheBusiestKnobKeepsWhatPaysAndPutsBackWhatDoesNot) {
  Autotuner tuner(MapAndPrefetch(1, 2), Opts());
  EXPECT_THAT(Feed(&tuner, 1, 50, {0.8, 0.0}), ElementsAre(1, 2));  // start-up, ignored
  EXPECT_THAT(Feed(&tuner, 1, 100, {0.8, 0.0}), ElementsAre(1, 2));
  // The base setting is rated (100/s); the busy map gets a second runner.
  EXPECT_THAT(Feed(&tuner, 1, 100, {0.8, 0.0}), ElementsAre(2, 2));
  EXPECT_THAT(Feed(&tuner, 1, 10, {0.8, 0.0}), ElementsAre(2, 2));  // settling: not counted
  // 180/s beats 100/s: kept, and from there a third runner is tried.
  EXPECT_THAT(Feed(&tuner, 2, 180, {0.7, 0.0}), ElementsAre(3, 2));
  // 182/s is within the margin: the third runner goes back, and nothing
  // else is under pressure, so the tuner settles at two runners.
  EXPECT_THAT(Feed(&tuner, 3, 182, {0.6, 0.0}), ElementsAre(2, 2));
  EXPECT_TRUE(tuner.converged());
  EXPECT_THAT(tuner.log(), ElementsAre(HasSubstr("map_1 parallelism 1 -> 2: 180 rows/s against 100: kept"),
                                       HasSubstr("map_1 parallelism 2 -> 3: 182 rows/s against 180: put back")));
  EXPECT_THAT(Feed(&tuner, 5, 1, {1.0, 1.0}), ElementsAre(2, 2));  // converged: stays
}

TEST(Autotuner, DeepensThePrefetchTheConsumerWaitsOn) {
  Autotuner tuner(MapAndPrefetch(4, 2), Opts());
  Feed(&tuner, 1, 0, {0.0, 0.3});
  EXPECT_THAT(Feed(&tuner, 2, 100, {0.0, 0.3}), ElementsAre(4, 3));
  EXPECT_THAT(Feed(&tuner, 3, 120, {0.0, 0.2}), ElementsAre(4, 4));
}

TEST(Autotuner, GivesBackAnIdleQueueWhenTheRateHolds) {
  Autotuner tuner(MapAndPrefetch(4, 3), Opts());
  Feed(&tuner, 1, 0, {0.0, -0.5});
  EXPECT_THAT(Feed(&tuner, 2, 100, {0.0, -0.5}), ElementsAre(4, 2));
  // 98/s is within 3% of the best: the smaller queue is kept.
  EXPECT_THAT(Feed(&tuner, 3, 98, {0.0, -0.5}), ElementsAre(4, 1));
  // 90/s is not: depth 1 goes back to 2.
  EXPECT_THAT(Feed(&tuner, 3, 90, {0.0, -0.5}), ElementsAre(4, 2));
  EXPECT_TRUE(tuner.converged());
}

TEST(Autotuner, StaysWithinBoundsAndTheRamBudget) {
  Autotuner::Options o = Opts();
  o.ram_budget_bytes = 300;
  // Depth 3 fits (3 x 100 bytes), depth 4 would not; parallelism is at its max.
  Autotuner tuner(MapAndPrefetch(4, 2, 100), o);
  Feed(&tuner, 1, 0, {1.0, 1.0});
  EXPECT_THAT(Feed(&tuner, 2, 100, {1.0, 1.0}), ElementsAre(4, 3));
  EXPECT_THAT(Feed(&tuner, 3, 200, {1.0, 1.0}), ElementsAre(4, 3));
  EXPECT_TRUE(tuner.converged());
}

TEST(Autotuner, DepthsPastTheRamBudgetAreLoweredBeforeTheyRun) {
  Autotuner::Options o = Opts();
  o.ram_budget_bytes = 500;
  // 4 runners and a depth of 5, 100 bytes each: 900 bytes. The depth goes
  // down to 1; the runners stay (they wait for room themselves).
  std::vector<Knob> knobs = MapAndPrefetch(4, 5, 100);
  knobs[0].bytes_per_unit = 100;
  Autotuner tuner(knobs, o);
  EXPECT_THAT(Values(tuner.knobs()), ElementsAre(4, 1));
  ASSERT_EQ(tuner.log().size(), 4u);
  EXPECT_THAT(tuner.log()[0], HasSubstr("prefetch_2 depth 5 -> 4: the setting holds 900 bytes, past the memory "
                                        "budget of 500"));
  // Never below the minimum, even if the budget cannot hold that.
  o.ram_budget_bytes = 10;
  Autotuner tightest(knobs, o);
  EXPECT_THAT(Values(tightest.knobs()), ElementsAre(4, 1));
  // A setting within the budget is left as it is.
  o.ram_budget_bytes = 900;
  Autotuner roomy(knobs, o);
  EXPECT_THAT(Values(roomy.knobs()), ElementsAre(4, 5));
  EXPECT_TRUE(roomy.log().empty());
}

TEST(Autotuner, WithoutKnobsThereIsNothingToDo) {
  Autotuner tuner({}, Opts());
  EXPECT_TRUE(tuner.converged());
  EXPECT_TRUE(tuner.Step(Interval{100, {}}).empty());
}

}  // namespace
}  // namespace sluice::exec
