// Checkpoint and resume through the service: a consumer's saved state, taken
// over by a new consumer (another process's, in real use), yields exactly
// the samples the state had not counted, each with the augmentation an
// uninterrupted run gives it, whatever the job recorded after the state
// was saved, across dispatcher restarts, and to and from in-process runs.
#include <signal.h>

#include <memory>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline.pb.h"
#include "service_samples.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/service/distributed_pipeline.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_cluster.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::sluice::testing::TestCluster;
using ::testing::HasSubstr;

class ServiceResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> local, exec::Pipeline::Create(InProcess()));
    ASSERT_OK_AND_ASSIGN(whole_, ReadEpoch(*local));
  }

  // What the distributed pipeline computes, in one process.
  static PipelineDef InProcess() { return Samples().Batch(64).Unordered().Build(); }

  // The first run and the resumed one together: every sample once, with
  // the images an uninterrupted run gives it.
  void ExpectTheWholeEpoch(const Received& before, const Received& after) {
    Received both = after;
    for (const auto& [id, n] : before.count) {
      both.count[id] += n;
      both.images_by_id[id] = before.images_by_id[id];
    }
    ExpectEachIdTimes(both, 1);
    int differing = 0;
    for (int id = 0; id < kRows; ++id) differing += both.images_by_id[id] != whole_.images_by_id[id];
    EXPECT_EQ(differing, 0) << "samples whose augmentation differs from the uninterrupted run's";
  }

  // An iterator of epoch 0 that read 20 batches, and one resumed on the
  // same pipeline from its state while it lives.
  struct Takeover {
    std::unique_ptr<exec::PipelineIterator> earlier, resumed;
    Received before;
  };
  static absl::Status TakeOver(const exec::Pipeline& pipeline, Takeover* t) {
    t->earlier = pipeline.Iterate(0);
    SLUICE_RETURN_IF_ERROR(ReadInto(t->earlier.get(), &t->before, 20));
    SLUICE_ASSIGN_OR_RETURN(const std::string state, t->earlier->SaveState());
    SLUICE_ASSIGN_OR_RETURN(t->resumed, pipeline.Resume(state));
    return absl::OkStatus();
  }

  testing::TempDir dir_;
  Received whole_;
};

// The consumer read on after saving its state, its splits reported done,
// and was then killed while the dispatcher still counted it alive: the
// resumed consumer gets what the state lacks, not what the job recorded.
TEST_F(ServiceResumeTest, AResumedConsumerGetsTheRestOfTheEpochWhateverTheJobRecordedSince) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  const PipelineDef def = Distributed(cluster.address(), "distributed_epoch", "train");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> first, CreatePipeline(def));
  std::unique_ptr<exec::PipelineIterator> it = first->Iterate(0);
  Received before;
  SLUICE_ASSERT_OK(ReadInto(it.get(), &before, 40));
  ASSERT_OK_AND_ASSIGN(const std::string state, it->SaveState());
  EXPECT_LT(state.size(), 64u * 1024);
  Received lost;  // read after the state was saved: the checkpoint never saw them
  SLUICE_ASSERT_OK(ReadInto(it.get(), &lost, 100));
  it.reset();  // the killed consumer's client stays until the dispatcher drops it

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> second, CreatePipeline(def));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::PipelineIterator> resumed, second->Resume(state));
  SLUICE_ASSERT_OK(ReadInto(resumed.get(), &before, 41));
  // Resumed again one batch later, while the partial splits (handed out
  // first, from their first record not done) are still arriving: the state
  // must count their records before that as theirs.
  ASSERT_OK_AND_ASSIGN(const std::string again, resumed->SaveState());
  resumed.reset();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> third, CreatePipeline(def));
  ASSERT_OK_AND_ASSIGN(resumed, third->Resume(again));
  Received after;
  SLUICE_ASSERT_OK(ReadInto(resumed.get(), &after));
  ExpectTheWholeEpoch(before, after);
  first.reset();
}

// The ids a state counts done: its done splits (100 records each, in file
// order: the samples do not shuffle their splits) and record ranges.
std::set<int64_t> DoneIds(const std::string& state) {
  IteratorState parsed;
  EXPECT_TRUE(parsed.ParseFromString(state));
  std::set<int64_t> ids;
  const DoneRowsState& done = parsed.done();
  std::vector<int64_t> splits(done.splits().begin(), done.splits().end());
  for (int64_t s = 0; s < done.splits_below(); ++s) splits.push_back(s);
  for (int64_t s : splits) {
    for (int64_t r = s * 100; r < (s + 1) * 100; ++r) ids.insert(r);
  }
  for (const FileRecordRanges& f : done.records()) {
    for (int i = 0; i + 1 < f.ranges_size(); i += 2) {
      for (int64_t r = f.ranges(i); r < f.ranges(i + 1); ++r) ids.insert(r);
    }
  }
  return ids;
}

// After every batch of a resumed epoch the state counts exactly the samples
// delivered, though its partial splits started after their done records.
TEST_F(ServiceResumeTest, AResumedConsumersStateCountsExactlyTheSamplesDelivered) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  DistributeOptions d;
  d.dispatcher = cluster.address();
  // Batches smaller than a split: a partial split's rest spans several.
  const PipelineDef def = Samples().Distribute(d).Batch(8).Build();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> first, CreatePipeline(def));
  std::unique_ptr<exec::PipelineIterator> it = first->Iterate(0);
  Received read;
  SLUICE_ASSERT_OK(ReadInto(it.get(), &read, 33));
  ASSERT_OK_AND_ASSIGN(std::string state, it->SaveState());
  it.reset();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> second, CreatePipeline(def));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::PipelineIterator> resumed, second->Resume(state));
  for (int batch = 34; batch <= 120; ++batch) {
    SLUICE_ASSERT_OK(ReadInto(resumed.get(), &read, batch));
    ASSERT_OK_AND_ASSIGN(state, resumed->SaveState());
    std::set<int64_t> delivered;
    for (const auto& [id, n] : read.count) delivered.insert(id);
    ASSERT_EQ(DoneIds(state), delivered) << "after batch " << batch;
  }
}

// A loader resumed on the same pipeline while its earlier iterator lives
// (a torch loader keeps it for state_dict()): the newer one reads the rest,
// the older one fails saying why, and neither waits on the other's splits.
TEST_F(ServiceResumeTest, AResumeOnTheSamePipelineSupersedesItsLiveEarlierIterator) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> pipeline, CreatePipeline(Distributed(cluster.address())));
  Takeover t;
  SLUICE_ASSERT_OK(TakeOver(*pipeline, &t));
  Received after;
  SLUICE_ASSERT_OK(ReadInto(t.resumed.get(), &after));
  ExpectTheWholeEpoch(t.before, after);
  Received more;
  EXPECT_THAT(ReadInto(t.earlier.get(), &more),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newer iterator")));
}

// The batches the earlier iterator's map made ahead are the newer one's to
// deliver: it handed out up to two of them after the takeover (every row of
// them a second time) before it failed.
TEST_F(ServiceResumeTest, ASupersededIteratorHandsOutNothingItMadeAhead) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> pipeline,
                       CreatePipeline(Samples()
                                          .Distribute(DistributeTo(cluster.address()))
                                          .Batch(64)
                                          .Map({Op("random_flip", {{"mode", "vertical"}})})
                                          .Build()));
  Takeover t;
  SLUICE_ASSERT_OK(TakeOver(*pipeline, &t));
  Received after;
  SLUICE_ASSERT_OK(ReadInto(t.resumed.get(), &after, 10));
  Received more;
  EXPECT_THAT(ReadInto(t.earlier.get(), &more),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newer iterator")));
  EXPECT_EQ(more.batches, 0);
  SLUICE_ASSERT_OK(ReadInto(t.resumed.get(), &after));
  for (const auto& [id, n] : t.before.count) after.count[id] += n;
  ExpectEachIdTimes(after, 1);
}

// A consumer resumed, read on, died, and was resumed from the same state
// again: the second resume takes back what the first one did.
TEST_F(ServiceResumeTest, TheSameStateResumedTwiceGivesTheSameRest) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  const PipelineDef def = Distributed(cluster.address(), "distributed_epoch", "train");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> saver, CreatePipeline(def));
  std::unique_ptr<exec::PipelineIterator> it = saver->Iterate(0);
  Received before;
  SLUICE_ASSERT_OK(ReadInto(it.get(), &before, 20));
  ASSERT_OK_AND_ASSIGN(const std::string state, it->SaveState());
  it.reset();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> died, CreatePipeline(def));
  ASSERT_OK_AND_ASSIGN(it, died->Resume(state));
  Received lost;
  SLUICE_ASSERT_OK(ReadInto(it.get(), &lost, 60));
  it.reset();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> again, CreatePipeline(def));
  ASSERT_OK_AND_ASSIGN(it, again->Resume(state));
  Received after;
  SLUICE_ASSERT_OK(ReadInto(it.get(), &after));
  ExpectTheWholeEpoch(before, after);
}

// A state moves between shapes: saved through 2 workers, restored in one
// process; saved in one process, restored through 3 workers.
TEST_F(ServiceResumeTest, AStateMovesBetweenTheServiceAndAnInProcessRun) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> distributed, CreatePipeline(Distributed(cluster.address())));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> local, exec::Pipeline::Create(InProcess()));
  for (bool from_service : {true, false}) {
    SCOPED_TRACE(from_service ? "service to in-process" : "in-process to service");
    if (!from_service) SLUICE_ASSERT_OK(cluster.AddWorker());
    exec::Pipeline& saver = from_service ? *distributed : *local;
    exec::Pipeline& restorer = from_service ? *local : *distributed;
    std::unique_ptr<exec::PipelineIterator> it = saver.Iterate(0);
    Received before;
    SLUICE_ASSERT_OK(ReadInto(it.get(), &before, 57));
    ASSERT_OK_AND_ASSIGN(const std::string state, it->SaveState());
    it.reset();
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::PipelineIterator> resumed, restorer.Resume(state));
    Received after;
    SLUICE_ASSERT_OK(ReadInto(resumed.get(), &after));
    ExpectTheWholeEpoch(before, after);
  }
}

// The resumed job's progress is journaled: a dispatcher killed and
// restarted from its work dir mid-way keeps it.
TEST_F(ServiceResumeTest, AResumedEpochFinishesExactlyOnceAcrossADispatcherRestart) {
  TestCluster cluster;
  const std::string work = dir_.Join("work");
  SLUICE_ASSERT_OK(cluster.StartDispatcher(work));
  SLUICE_ASSERT_OK(cluster.AddWorker());
  SLUICE_ASSERT_OK(cluster.AddWorker());
  const PipelineDef def = Distributed(cluster.address(), "distributed_epoch", "train");
  Received before;
  // The first consumer's client stays in the job: the resume entry, not a
  // new job, is what the restarted dispatcher replays.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> first, CreatePipeline(def));
  std::unique_ptr<exec::PipelineIterator> it = first->Iterate(0);
  SLUICE_ASSERT_OK(ReadInto(it.get(), &before, 30));
  ASSERT_OK_AND_ASSIGN(const std::string state, it->SaveState());
  Received lost;
  SLUICE_ASSERT_OK(ReadInto(it.get(), &lost, 60));
  it.reset();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> second, CreatePipeline(def));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::PipelineIterator> resumed, second->Resume(state));
  Received after;
  absl::Status restarted;
  SLUICE_ASSERT_OK(
      ReadInto(resumed.get(), &after, -1, 40, [&] { restarted = cluster.RestartDispatcher(SIGKILL, work); }));
  SLUICE_ASSERT_OK(restarted);
  ExpectTheWholeEpoch(before, after);
}

TEST_F(ServiceResumeTest, ParallelEpochsRefuseToSaveAndAnotherPipelinesStateIsRefused) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> parallel,
                       CreatePipeline(Distributed(cluster.address(), "parallel_epochs")));
  EXPECT_THAT(parallel->Iterate(0)->SaveState().status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("parallel_epochs")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> distributed, CreatePipeline(Distributed(cluster.address())));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> other,
                       exec::Pipeline::Create(Samples().Batch(32).Unordered().Build()));
  ASSERT_OK_AND_ASSIGN(const std::string state, other->Iterate(0)->SaveState());
  EXPECT_THAT(distributed->Resume(state).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pipeline_fingerprint")));
}

}  // namespace
}  // namespace sluice::service
