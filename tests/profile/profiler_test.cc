#include "sluice/profile/profiler.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::profile {
namespace {

using ::testing::HasSubstr;

// Pipelines built to be bound by a known cause; the verdict must name it.
// The causes are made large (a blur 50x the rest, reading throttled to a
// few hundred samples a second, a trainer 50x slower than the input) so
// the verdicts hold on any machine, and enough records (2,048) that an
// epoch's start is small beside its reading, also on a busy machine.
class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::WriteCifarTfRecords(dir_.path(), 1024, 2); }

  PipelineBuilder Cifar() {
    return PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", 3072), Int64Feature("label")});
  }

  static ProfileOptions Quick() {
    ProfileOptions o;
    o.seconds = 0.6;
    o.short_seconds = 0.4;
    o.ablation = false;
    return o;
  }

  static ProfileResult Run(const PipelineDef& def, const ProfileOptions& options) {
    absl::StatusOr<ProfileResult> r = RunProfile(def, options, [](const std::string&) {});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : ProfileResult();
  }

  testing::TempDir dir_;
};

TEST_F(ProfilerTest, ACostlyOpIsNamedAsTheBottleneck) {
  PipelineDef def = Cifar()
                        .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("rescale", {{"scale", 1 / 255.0}}),
                              Op("gaussian_blur", {{"ksize", 31}, {"sigma", 6.0}})})
                        .Batch(16)
                        .Build();
  const ProfileResult r = Run(def, Quick());
  EXPECT_EQ(r.verdict.bound, Verdict::Bound::kCompute) << r.verdict.summary;
  EXPECT_EQ(r.verdict.bottleneck, "gaussian_blur");
  EXPECT_THAT(r.verdict.summary, HasSubstr("gaussian_blur is"));
  const OpCost* blur = nullptr;
  for (const OpCost& op : r.findings.ops) {
    if (op.op_name == "gaussian_blur") blur = &op;
  }
  ASSERT_NE(blur, nullptr);
  EXPECT_GT(blur->cpu_share, 0.5);
  EXPECT_GT(blur->core_s_per_1k, 0);
  // Deterministic ops right after the source: materialize is offered.
  EXPECT_GT(r.findings.materializable_share, 0.5);
  EXPECT_THAT(r.findings.materializable, HasSubstr("gaussian_blur"));
}

// A shuffle's work was in the shares' whole with no row of its own: the
// rows summed to 70%. Each node that computes has one, and they add up.
TEST_F(ProfilerTest, TheRowsSharesAddUpWithAShuffleAndABatch) {
  PipelineDef def = Cifar().Shuffle(1000).Map({Op("reshape", {{"shape", {32, 32, 3}}})}).Batch(64).Build();
  const ProfileResult r = Run(def, Quick());
  double sum = 0;
  bool shuffle = false;
  for (const OpCost& op : r.findings.ops) {
    sum += op.cpu_share;
    shuffle |= op.op_name == "shuffle" && op.op == -1 && op.node > 0;
  }
  EXPECT_TRUE(shuffle);
  EXPECT_NEAR(sum, 1.0, 1e-9);
  // Only the parse is deterministic before the shuffle: nothing to save.
  EXPECT_EQ(r.findings.materializable_share, 0);
}

// Cheap ops on single samples: the maps' own work (a chunk allocated and
// assembled per element) was a quarter of the CPU, in no row.
TEST_F(ProfilerTest, AMapsOwnWorkBesideItsOpsHasARow) {
  std::vector<float> x(50000 * 16, 0.5f);
  PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("x", {16}, x)})
                        .Map({Op("rescale", {{"field", "x"}, {"scale", 2.0}})})
                        .Map({Op("rescale", {{"field", "x"}, {"scale", 0.5}})})
                        .Build();
  const ProfileResult r = Run(def, Quick());
  double sum = 0;
  int own = 0;
  for (const OpCost& op : r.findings.ops) {
    sum += op.cpu_share;
    own += op.op_name == "map" && op.op == -1 && op.node > 0;
  }
  EXPECT_EQ(own, 2);
  EXPECT_NEAR(sum, 1.0, 1e-9);
}

TEST_F(ProfilerTest, TheGpuTailIsTheOpsAfterTheLastWithoutACudaKernel) {
  if (ops::OpRegistry::Global().runtime(ops::Backend::kCuda) == nullptr) {
    GTEST_SKIP() << "this build has no cuda backend (SLUICE_WITH_CUDA): no op has a cuda kernel";
  }
  PipelineDef def = Cifar()
                        .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("grey_dilation", {{"size", 3}})})
                        .Batch(16)
                        .Map({Op("rescale", {{"scale", 1 / 255.0}})})
                        .Build();
  const ProfileResult r = Run(def, Quick());
  // The Example parse the graph adds (cpu only) is not part of it.
  EXPECT_EQ(r.findings.gpu_tail, "grey_dilation, rescale");
  EXPECT_GT(r.findings.gpu_tail_share, 0);
  EXPECT_LT(r.findings.gpu_tail_share, 1);
}

TEST_F(ProfilerTest, AThrottledReaderIsNamedAsTheBottleneck) {
  PipelineDef def = Cifar().Map({Op("reshape", {{"shape", {32, 32, 3}}})}).Batch(8).Build();
  def.mutable_nodes(0)->mutable_source()->set_throttle_bytes_per_s(1.5e6);
  const ProfileResult r = Run(def, Quick());
  EXPECT_EQ(r.verdict.bound, Verdict::Bound::kReading) << r.verdict.summary;
  EXPECT_EQ(r.verdict.bottleneck, "reading");
  EXPECT_LT(r.findings.samples_per_s, 1000);  // 1.5 MB/s of 3 KB records
  // Reading's cost is its CPU, not its wait for the throttle: a thousand
  // samples took about 2 s to read and far less than a core-second.
  const auto read =
      std::find_if(r.findings.ops.begin(), r.findings.ops.end(), [](const OpCost& op) { return op.op_name == "read"; });
  ASSERT_NE(read, r.findings.ops.end());
  EXPECT_LT(read->core_s_per_1k, 0.5);
}

TEST_F(ProfilerTest, ASlowConsumerIsNamedAsTheBottleneck) {
  PipelineDef def = Cifar().Map({Op("reshape", {{"shape", {32, 32, 3}}})}).Batch(8).Build();
  ProfileOptions options = Quick();
  options.consumer_samples_per_s = 400;
  const ProfileResult r = Run(def, options);
  EXPECT_EQ(r.verdict.bound, Verdict::Bound::kTrainer) << r.verdict.summary;
  EXPECT_THAT(r.verdict.summary, HasSubstr("trainer-bound"));
  EXPECT_LT(r.findings.paced_wait_share, 0.5);
}

TEST_F(ProfilerTest, AblationMeasuresEachOpThatComputes) {
  PipelineDef def =
      Cifar().Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("grey_dilation", {{"size", 3}})}).Batch(8).Build();
  ProfileOptions options = Quick();
  options.ablation = true;
  const ProfileResult r = Run(def, options);
  for (const OpCost& op : r.findings.ops) {
    SCOPED_TRACE(op.op_name);
    if (op.view || op.op < 0) {
      EXPECT_EQ(op.ablated_samples_per_s, 0);  // nothing to take away
    } else {
      EXPECT_GT(op.ablated_samples_per_s, 0);
    }
  }
}

TEST_F(ProfilerTest, ADistributeNodeIsProfiledInProcessAndSaysSo) {
  PipelineDef def = Cifar().Map({Op("reshape", {{"shape", {32, 32, 3}}})}).Distribute().Batch(8).Build();
  const ProfileResult r = Run(def, Quick());
  EXPECT_THAT(r.note, HasSubstr("distribute node was left out"));
  EXPECT_GT(r.findings.samples_per_s, 0);
}

}  // namespace
}  // namespace sluice::profile
