#include "sluice/profile/analyzer.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::profile {
namespace {

using ::testing::Contains;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Not;

OpCost Op(int node, int op, const std::string& name, double share, bool random = false) {
  OpCost c;
  c.node = node;
  c.op = op;
  c.node_name = "map_" + std::to_string(node);
  c.op_name = name;
  c.cpu_share = share;
  c.random = random;
  return c;
}

// W2's shape: 41k/s on 2 cores, blur the costliest, reading far faster.
Findings ComputeBound() {
  Findings f;
  f.pipeline = "w2";
  f.threads = 2;
  f.samples_per_s = 41'000;
  f.cpu_s_per_sample = 2.0 / 41'000;
  f.input_only_samples_per_s = 900'000;
  f.ops = {Op(1, 0, "grey_dilation", 0.09), Op(1, 1, "gaussian_blur", 0.71), Op(3, 0, "random_rotation", 0.15, true)};
  f.materializable_share = 0.80;
  f.materializable = "grey_dilation, gaussian_blur";
  f.front_share = 0.80;
  f.front_bytes_per_sample = 3072;
  return f;
}

TEST(Analyzer, NamesTheCostliestOpAndPredictsEachLever) {
  Findings f = ComputeBound();
  f.consumer_samples_per_s = 120'000;
  f.paced_wait_share = 0.66;
  const Verdict v = Analyze(f);
  EXPECT_EQ(v.bound, Verdict::Bound::kCompute);
  EXPECT_EQ(v.bottleneck, "gaussian_blur");
  EXPECT_THAT(v.summary, HasSubstr("input-bound: pipeline 41k samples/s, the trainer 120k"));
  EXPECT_THAT(v.summary, HasSubstr("the trainer waits 66% of its time"));
  EXPECT_THAT(v.summary, HasSubstr("gaussian_blur is 71% of CPU"));
  ASSERT_GE(v.levers.size(), 3u);
  EXPECT_THAT(v.levers[0].action, HasSubstr("materialize grey_dilation, gaussian_blur"));
  EXPECT_NEAR(v.levers[0].predicted_samples_per_s, 41'000 / 0.2, 1);  // CPU-bound: 1 / (1 - 0.8)
  EXPECT_THAT(v.levers[1].action, HasSubstr("offload the per-sample front (80% of the CPU) to"));
  EXPECT_GT(v.levers[1].predicted_samples_per_s, 41'000);
  EXPECT_THAT(v.levers[2].action, HasSubstr("run on 6 cores instead of 2"));  // 120k x 48.8 µs = 5.9 cores
  EXPECT_EQ(v.levers[2].predicted_samples_per_s, 120'000);
}

// An op that waits (a Python op sleeping 1 ms a sample) takes more of the
// threads than its CPU says: more cores still run more of it side by side,
// and fewer cores are never offered as faster.
TEST(Analyzer, AnOpThatWaitsIsCostedByTheThreadsItTakesNotItsCpu) {
  Findings f;
  f.pipeline = "waits";
  f.threads = 2;
  f.samples_per_s = 1'800;
  f.cpu_s_per_sample = 53e-6;  // 0.1 of the 2 cores busy
  f.input_only_samples_per_s = 2'600'000;
  f.ops = {Op(1, 0, "python", 0.999)};
  f.front_share = 0.999;
  f.front_bytes_per_sample = 792;
  f.consumer_samples_per_s = 5'000;
  f.paced_wait_share = 0.6;
  const Verdict v = Analyze(f);
  EXPECT_THAT(v.levers, Contains(Field(&Lever::action, HasSubstr("run on 6 cores instead of 2"))));
  EXPECT_THAT(v.levers, Not(Contains(Field(&Lever::action, HasSubstr("run on 1 cores")))));
  for (const Lever& lever : v.levers) {
    if (lever.action.find("offload") != std::string::npos) {
      EXPECT_LT(lever.predicted_samples_per_s, 8'000) << lever.action;  // 2 workers run ~3.6k, not 22k
    }
  }
}

TEST(Analyzer, ProposesMovingTheTailToTheGpuPredictedOrMeasured) {
  Findings f = ComputeBound();
  f.gpu_tail = "grey_dilation, gaussian_blur, random_rotation";
  f.gpu_tail_share = 0.95;
  auto gpu_lever = [](const Verdict& v) -> const Lever* {
    for (const Lever& l : v.levers) {
      if (l.action.find("to the GPU") != std::string::npos) return &l;
    }
    return nullptr;
  };
  const Verdict without_gpu = Analyze(f);
  const Lever* predicted = gpu_lever(without_gpu);
  ASSERT_NE(predicted, nullptr);
  EXPECT_THAT(predicted->action, HasSubstr("move grey_dilation, gaussian_blur, random_rotation (95% of the CPU)"));
  // The CPU keeps 5% of 48.8 µs a sample on 2 cores: 820k/s, under reading's 900k.
  EXPECT_NEAR(predicted->predicted_samples_per_s, 2 / (0.05 * 2.0 / 41'000), 1);
  EXPECT_THAT(predicted->why, HasSubstr("this process has none"));

  f.gpu_available = true;
  f.gpu_tail_samples_per_s = 600'000;
  const Verdict with_gpu = Analyze(f);
  const Lever* measured = gpu_lever(with_gpu);
  ASSERT_NE(measured, nullptr);
  EXPECT_EQ(measured->predicted_samples_per_s, 600'000);
  EXPECT_THAT(measured->why, HasSubstr("measured here on the GPU"));

  f.gpu_tail_share = 0.05;  // too little to move
  const Verdict little = Analyze(f);
  EXPECT_EQ(gpu_lever(little), nullptr);
}

TEST(Analyzer, ReadingIsTheBoundWhenTheSourceAloneIsNoFaster) {
  Findings f = ComputeBound();
  f.input_only_samples_per_s = 45'000;  // within 25% of the whole pipeline
  const Verdict v = Analyze(f);
  EXPECT_EQ(v.bound, Verdict::Bound::kReading);
  EXPECT_EQ(v.bottleneck, "reading");
  EXPECT_THAT(v.summary, HasSubstr("bound by reading: the source alone (reading and parsing) delivers 45k"));
  ASSERT_EQ(v.levers.size(), 1u);
  // Both cores busy: more splits read at once competed for them (1.4x slower).
  EXPECT_THAT(v.levers[0].action, HasSubstr("read less: only the features and columns the ops use"));
  EXPECT_THAT(v.levers[0].why, HasSubstr("threads are 100% busy"));
  f.cpu_s_per_sample = 0.5 / 41'000;  // a quarter of them: reading waits on storage
  EXPECT_THAT(Analyze(f).levers[0].action, HasSubstr("read faster: more splits read at once"));
}

TEST(Analyzer, MoreCoresAreNotPredictedFasterThanTheSourceReads) {
  Findings f = ComputeBound();
  f.target_samples_per_s = 2'000'000;
  const Verdict v = Analyze(f);
  const auto cores = std::find_if(v.levers.begin(), v.levers.end(),
                                  [](const Lever& l) { return l.action.find("cores instead") != std::string::npos; });
  ASSERT_NE(cores, v.levers.end());
  EXPECT_EQ(cores->predicted_samples_per_s, 900'000);
  EXPECT_THAT(cores->action, HasSubstr("run on 44 cores instead of 2"));  // 900k x 48.8 µs
  EXPECT_THAT(cores->why, HasSubstr("reading caps it at 900k samples/s"));
}

TEST(Analyzer, ObjectsReadEveryEpochAreOfferedALocalCopy) {
  Findings f = ComputeBound();
  f.uncached_objects = true;
  f.input_only_samples_per_s = 45'000;  // reading-bound: offered first
  Verdict v = Analyze(f);
  ASSERT_EQ(v.levers.size(), 2u);
  EXPECT_THAT(v.levers[0].action, HasSubstr("the source's object_cache {dir, max_bytes}"));
  EXPECT_THAT(v.levers[1].action, HasSubstr("read less"));
  // Compute-bound: offered when reading is a tenth of the CPU or more.
  f = ComputeBound();
  f.uncached_objects = true;
  f.ops.push_back(Op(0, -1, "read", 0.05));
  EXPECT_THAT(Analyze(f).levers, Not(Contains(Field(&Lever::action, HasSubstr("object_cache")))));
  f.ops.back().cpu_share = 0.2;
  v = Analyze(f);
  ASSERT_THAT(v.levers, Contains(Field(&Lever::action, HasSubstr("object_cache"))));
  EXPECT_THAT(v.levers[0].why, HasSubstr("reading is 20% of the CPU"));
  // Cached (or local files): never.
  f.uncached_objects = false;
  EXPECT_THAT(Analyze(f).levers, Not(Contains(Field(&Lever::action, HasSubstr("object_cache")))));
}

TEST(Analyzer, TheTrainerIsTheBoundWhenTheInputKeepsUp) {
  Findings f = ComputeBound();
  f.consumer_samples_per_s = 10'000;
  f.paced_wait_share = 0.01;
  const Verdict v = Analyze(f);
  EXPECT_EQ(v.bound, Verdict::Bound::kTrainer);
  EXPECT_EQ(v.bottleneck, "the trainer");
  EXPECT_THAT(v.summary, HasSubstr("trainer-bound: pipeline 41k samples/s, the trainer takes 10k; the input keeps up "
                                   "with 4.1x to spare"));
  ASSERT_EQ(v.levers.size(), 1u);
  EXPECT_THAT(v.levers[0].action, HasSubstr("give the input 1 of 2 cores"));
}

TEST(Analyzer, RandomOrCheapPrefixesAreNotOfferedForMaterializing) {
  Findings f = ComputeBound();
  f.materializable_share = 0.02;
  const Verdict v = Analyze(f);
  for (const Lever& l : v.levers) EXPECT_THAT(l.action, ::testing::Not(HasSubstr("materialize")));
}

TEST(Analyzer, ShortRates) {
  EXPECT_EQ(ShortRate(850), "850");
  EXPECT_EQ(ShortRate(4'300), "4.3k");
  EXPECT_EQ(ShortRate(41'000), "41k");
  EXPECT_EQ(ShortRate(1'250'000), "1.2M");
}

}  // namespace
}  // namespace sluice::profile
