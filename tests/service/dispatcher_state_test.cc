#include "sluice/service/dispatcher_state.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1000);

PipelineDef Def(int rows) {
  return PipelineBuilder::Arrays({MakeArrayColumn("x", {}, std::vector<int64_t>(rows, 1))})
      .Build();
}

ElementSpec Splits(int n) {
  ElementSpec e;
  e.set_num_splits(n);
  return e;
}

class DispatcherStateTest : public ::testing::Test {
 protected:
  DispatcherState state_{{}, [this](const JournalEntry& e) {
                           journal_.push_back(e);
                           return absl::OkStatus();
                         }};
  std::vector<JournalEntry> journal_;

  GetOrCreateJobResponse Job(const std::string& pipeline, const std::string& name = "",
                             ProcessingMode mode = DISTRIBUTED_EPOCH) {
    GetOrCreateJobRequest r;
    r.set_pipeline_id(pipeline);
    r.set_job_name(name);
    r.set_mode(mode);
    auto job = state_.GetOrCreateJob(r, kT0);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : GetOrCreateJobResponse();
  }
  int64_t Worker(const std::string& address, absl::Time now = kT0, int64_t id = 0,
                 const std::vector<std::string>& ops = {}) {
    WorkerHeartbeatRequest r;
    r.set_worker_id(id);
    r.set_address(address);
    for (const std::string& op : ops) r.add_ops(op);
    auto heard = state_.WorkerHeartbeat(r, now);
    EXPECT_TRUE(heard.ok()) << heard.status();
    return heard.ok() ? heard->worker_id() : -1;
  }
  static GetSplitRequest Ask(const GetOrCreateJobResponse& job, int64_t worker, uint64_t epoch = 0) {
    GetSplitRequest r;
    r.set_job_id(job.job_id());
    r.set_client_id(job.client_id());
    r.set_epoch(epoch);
    r.set_worker_id(worker);
    return r;
  }
};

TEST_F(DispatcherStateTest, PipelinesAreDeduplicatedAndNamedJobsShared) {
  ASSERT_OK_AND_ASSIGN(std::string a, state_.RegisterPipeline(Def(4), Splits(1)));
  ASSERT_OK_AND_ASSIGN(std::string again, state_.RegisterPipeline(Def(4), Splits(1)));
  ASSERT_OK_AND_ASSIGN(std::string b, state_.RegisterPipeline(Def(5), Splits(1)));
  EXPECT_EQ(a, again);
  EXPECT_NE(a, b);
  EXPECT_EQ(journal_.size(), 2u);

  const GetOrCreateJobResponse first = Job(a, "shared");
  const GetOrCreateJobResponse second = Job(a, "shared");
  const GetOrCreateJobResponse own = Job(a);
  EXPECT_EQ(first.job_id(), second.job_id());
  EXPECT_NE(first.client_id(), second.client_id());
  EXPECT_NE(own.job_id(), first.job_id());

  GetOrCreateJobRequest other_mode;
  other_mode.set_pipeline_id(a);
  other_mode.set_job_name("shared");
  other_mode.set_mode(PARALLEL_EPOCHS);
  EXPECT_THAT(state_.GetOrCreateJob(other_mode, kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("job 'shared' exists")));
  GetOrCreateJobRequest unknown;
  unknown.set_pipeline_id("feed");
  EXPECT_THAT(state_.GetOrCreateJob(unknown, kT0),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no pipeline feed")));
}

TEST_F(DispatcherStateTest, OnlyWorkersWithEveryOpOfAPipelineServeItsJobs) {
  const PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("x", {4}, std::vector<float>(8, 1.f))})
                              .Map({Op("random_cutout"), Op("rescale", {{"scale", 2.0}})})
                              .Build();
  EXPECT_THAT(state_.CapableWorker({"random_cutout"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'random_cutout' is not registered on the dispatcher and no live worker has it")));
  const int64_t plain = Worker("plain:1", kT0, 0, {"rescale"});
  const int64_t plugged = Worker("plugged:2", kT0, 0, {"rescale", "random_cutout"});
  ASSERT_OK_AND_ASSIGN(std::string capable, state_.CapableWorker({"random_cutout"}));
  EXPECT_EQ(capable, "plugged:2");

  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(def, Splits(2)));
  const GetOrCreateJobResponse job = Job(p);
  ClientHeartbeatRequest hb;
  hb.set_job_id(job.job_id());
  hb.set_client_id(job.client_id());
  ASSERT_OK_AND_ASSIGN(ClientHeartbeatResponse tasks, state_.ClientHeartbeat(hb, kT0));
  ASSERT_EQ(tasks.tasks_size(), 1);
  EXPECT_EQ(tasks.tasks(0).worker_id(), plugged);
  EXPECT_THAT(state_.GetSplit(Ask(job, plain), kT0),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("lacks ops of job")));
  ASSERT_OK_AND_ASSIGN(GetSplitResponse s, state_.GetSplit(Ask(job, plugged), kT0));
  EXPECT_EQ(s.state(), GetSplitResponse::SPLIT);
}

TEST_F(DispatcherStateTest, ASilentWorkersSplitsGoBackToTheirClient) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(3)));
  const GetOrCreateJobResponse job = Job(p);
  const int64_t w1 = Worker("a:1");
  const int64_t w2 = Worker("b:2");
  ClientHeartbeatRequest hb;
  hb.set_job_id(job.job_id());
  hb.set_client_id(job.client_id());
  ASSERT_OK_AND_ASSIGN(ClientHeartbeatResponse tasks, state_.ClientHeartbeat(hb, kT0));
  EXPECT_EQ(tasks.tasks_size(), 2);

  ASSERT_OK_AND_ASSIGN(GetSplitResponse s0, state_.GetSplit(Ask(job, w1), kT0));
  ASSERT_OK_AND_ASSIGN(GetSplitResponse s1, state_.GetSplit(Ask(job, w2), kT0));
  EXPECT_EQ(s0.split(), 0);
  EXPECT_EQ(s1.split(), 1);
  // w1 falls silent; w2 and the client keep beating.
  const absl::Time later = kT0 + absl::Seconds(10);
  Worker("b:2", later, w2);
  SLUICE_ASSERT_OK(state_.ClientHeartbeat(hb, later).status());
  SLUICE_ASSERT_OK(state_.Expire(later));
  ASSERT_OK_AND_ASSIGN(tasks, state_.ClientHeartbeat(hb, later));
  ASSERT_EQ(tasks.tasks_size(), 1);
  EXPECT_EQ(tasks.tasks(0).worker_address(), "b:2");
  ASSERT_OK_AND_ASSIGN(GetSplitResponse rerun, state_.GetSplit(Ask(job, w2), later));
  EXPECT_EQ(rerun.split(), 0);
}

TEST_F(DispatcherStateTest, ARestartFromTheJournalKeepsJobsAndProgress) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(3)));
  const GetOrCreateJobResponse job = Job(p, "train");
  const int64_t w = Worker("a:1");
  for (int i = 0; i < 2; ++i) SLUICE_ASSERT_OK(state_.GetSplit(Ask(job, w), kT0).status());
  ReportSplitsRequest done;
  done.set_job_id(job.job_id());
  done.set_client_id(job.client_id());
  done.add_completed(0);
  SLUICE_ASSERT_OK(state_.ReportSplits(done, kT0));

  DispatcherState restarted({}, nullptr);
  for (const JournalEntry& e : journal_) restarted.Apply(e);
  ASSERT_NE(restarted.FindPipeline(p), nullptr);
  EXPECT_EQ(restarted.FindPipeline(p)->element().num_splits(), 3);
  // Split 1 was in flight: it runs again for the same client; 0 stays done.
  GetSplitRequest ask = Ask(job, Worker("a:1"));
  ASSERT_OK_AND_ASSIGN(GetSplitResponse first, restarted.GetSplit(ask, kT0));
  ASSERT_OK_AND_ASSIGN(GetSplitResponse second, restarted.GetSplit(ask, kT0));
  EXPECT_EQ(first.split(), 1);
  EXPECT_EQ(second.split(), 2);
  GetOrCreateJobRequest named;
  named.set_pipeline_id(p);
  named.set_job_name("train");
  ASSERT_OK_AND_ASSIGN(GetOrCreateJobResponse rejoined, restarted.GetOrCreateJob(named, kT0));
  EXPECT_EQ(rejoined.job_id(), job.job_id());
  EXPECT_GT(rejoined.client_id(), job.client_id());
}

// The clients a restarted dispatcher replays count as heard from when it
// came back: an outage longer than the client timeout drops no one.
TEST_F(DispatcherStateTest, ReplayedClientsOutliveAnOutageLongerThanTheClientTimeout) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(3)));
  const GetOrCreateJobResponse job = Job(p);
  DispatcherState::Options options;
  options.client_timeout = absl::Seconds(5);
  DispatcherState restarted(options, nullptr);
  for (const JournalEntry& e : journal_) restarted.Apply(e);
  const absl::Time back = kT0 + absl::Minutes(10);
  restarted.Recovered(back);
  SLUICE_ASSERT_OK(restarted.Expire(back + absl::Seconds(4)));
  ClientHeartbeatRequest hb;
  hb.set_job_id(job.job_id());
  hb.set_client_id(job.client_id());
  SLUICE_EXPECT_OK(restarted.ClientHeartbeat(hb, back + absl::Seconds(4)).status());
  SLUICE_ASSERT_OK(restarted.Expire(back + absl::Seconds(10)));
  EXPECT_THAT(restarted.ClientHeartbeat(hb, back + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("is unknown"))) << "silent 6 s since it was heard";
}

TEST_F(DispatcherStateTest, AWorkerIdIsNeverHandedToAnotherWorker) {
  const int64_t a = Worker("a:1");
  DispatcherState restarted({}, nullptr);
  for (const JournalEntry& e : journal_) restarted.Apply(e);
  WorkerHeartbeatRequest b;
  b.set_address("b:2");
  ASSERT_OK_AND_ASSIGN(WorkerHeartbeatResponse b_id, restarted.WorkerHeartbeat(b, kT0));
  EXPECT_NE(b_id.worker_id(), a) << "a new worker before the old one is back";
  WorkerHeartbeatRequest back;
  back.set_worker_id(a);
  back.set_address("a:1");
  ASSERT_OK_AND_ASSIGN(WorkerHeartbeatResponse a_id, restarted.WorkerHeartbeat(back, kT0));
  EXPECT_EQ(a_id.worker_id(), a) << "the old worker keeps its id";
  WorkerHeartbeatRequest stranger;
  stranger.set_worker_id(99);  // from a dispatcher that kept no journal
  stranger.set_address("c:3");
  ASSERT_OK_AND_ASSIGN(WorkerHeartbeatResponse c_id, restarted.WorkerHeartbeat(stranger, kT0));
  EXPECT_NE(c_id.worker_id(), 99);
  EXPECT_NE(c_id.worker_id(), b_id.worker_id());
}

// A compacted journal is the snapshot: replayed, it gives the same jobs,
// progress and split holders, and never hands out an id again.
TEST_F(DispatcherStateTest, ASnapshotRebuildsTheStateWithoutItsHistory) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(4)));
  const GetOrCreateJobResponse job = Job(p, "train");
  const GetOrCreateJobResponse leaver = Job(p, "train");
  const int64_t w = Worker("a:1");
  for (int i = 0; i < 3; ++i) SLUICE_ASSERT_OK(state_.GetSplit(Ask(job, w), kT0).status());
  ReportSplitsRequest done;
  done.set_job_id(job.job_id());
  done.set_client_id(job.client_id());
  for (int round = 0; round < 50; ++round) {  // history a snapshot drops
    done.clear_completed();
    done.add_completed(round % 2);
    SLUICE_ASSERT_OK(state_.ReportSplits(done, kT0));
  }
  ReleaseClientRequest release;
  release.set_job_id(leaver.job_id());
  release.set_client_id(leaver.client_id());
  SLUICE_ASSERT_OK(state_.ReleaseClient(release));

  const std::vector<JournalEntry> snapshot = state_.Snapshot();
  EXPECT_LT(snapshot.size(), journal_.size() / 4);
  DispatcherState restarted({}, nullptr);
  for (const JournalEntry& e : snapshot) restarted.Apply(e);
  const DispatcherStatus before = state_.Status(kT0), after = restarted.Status(kT0);
  ASSERT_EQ(after.jobs_size(), 1);
  EXPECT_EQ(after.jobs(0).clients(), 1);
  EXPECT_EQ(after.jobs(0).splits_completed(), before.jobs(0).splits_completed());
  // Split 2 was in flight to the client: it runs again for it; then 3.
  GetSplitRequest ask = Ask(job, Worker("a:1"));
  ASSERT_OK_AND_ASSIGN(GetSplitResponse first, restarted.GetSplit(ask, kT0));
  EXPECT_EQ(first.split(), 2);
  ASSERT_OK_AND_ASSIGN(GetSplitResponse second, restarted.GetSplit(ask, kT0));
  EXPECT_EQ(second.split(), 3);
  // The released client's id (the highest so far) is not handed out again.
  const GetOrCreateJobResponse next = [&] {
    GetOrCreateJobRequest r;
    r.set_pipeline_id(p);
    r.set_job_name("train");
    return *restarted.GetOrCreateJob(r, kT0);
  }();
  EXPECT_GT(next.client_id(), leaver.client_id());
}

}  // namespace
}  // namespace sluice::service
