#include "sluice/service/dispatcher_state.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1000);

PipelineDef Def(int rows) {
  return PipelineBuilder::Arrays({MakeArrayColumn("x", {}, std::vector<int64_t>(rows, 1))}).Build();
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
    auto job = state_.GetOrCreateJob(r, "", kT0);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : GetOrCreateJobResponse();
  }
  int64_t Worker(const std::string& address, absl::Time now = kT0, int64_t id = 0,
                 const std::vector<std::string>& ops = {}) {
    WorkerHeartbeatRequest r;
    r.set_worker_id(id);
    r.set_address(address);
    r.set_secret(secrets_[id]);
    for (const std::string& op : ops) r.add_ops(op);
    auto heard = state_.WorkerHeartbeat(r, now);
    EXPECT_TRUE(heard.ok()) << heard.status();
    if (!heard.ok()) return -1;
    secrets_[heard->worker_id()] = heard->secret();
    return heard->worker_id();
  }
  // A consumer's state (saved by client `saved_client` of the job of uid
  // `saved_uid`) resumed, splits 1 and 2 taken and 1 finished before that
  // trainer died, and the same state resumed again: the second resume's
  // client.
  GetOrCreateJobResponse ResumeTwice(const std::string& pipeline, const std::string& saved_uid, int64_t saved_client,
                                     int64_t worker) {
    auto resume = [&](const GetOrCreateJobResponse& c) {
      ResumeClientRequest r;
      r.set_job_id(c.job_id());
      r.set_client_id(c.client_id());
      r.add_done(0);
      r.set_previous_job_uid(saved_uid);
      r.set_previous_client_id(saved_client);
      SLUICE_EXPECT_OK(state_.ResumeClient(r, kT0));
    };
    const GetOrCreateJobResponse first = Job(pipeline, "train");
    resume(first);
    for (int i = 0; i < 2; ++i) SLUICE_EXPECT_OK(state_.GetSplit(Ask(first, worker), kT0).status());
    ReportSplitsRequest done;
    done.set_job_id(first.job_id());
    done.set_client_id(first.client_id());
    done.add_completed(1);
    SLUICE_EXPECT_OK(state_.ReportSplits(done, kT0));
    const GetOrCreateJobResponse again = Job(pipeline, "train");
    resume(again);
    return again;
  }
  // The next `n` splits `s` hands the asker.
  static std::vector<int64_t> NextSplits(DispatcherState* s, GetSplitRequest ask, int n) {
    std::vector<int64_t> got;
    for (int i = 0; i < n; ++i) {
      ask.set_seq(i + 1);
      absl::StatusOr<GetSplitResponse> next = s->GetSplit(ask, kT0);
      EXPECT_TRUE(next.ok()) << next.status();
      got.push_back(next.ok() ? next->split() : -1);
    }
    return got;
  }
  std::map<int64_t, std::string> secrets_;  // what each worker was given
  static GetSplitRequest Ask(const GetOrCreateJobResponse& job, int64_t worker, uint64_t epoch = 0) {
    GetSplitRequest r;
    r.set_job_id(job.job_id());
    r.set_client_id(job.client_id());
    r.set_epoch(epoch);
    r.set_worker_id(worker);
    return r;
  }
  // The job's client reports `split` of `epoch` complete.
  absl::Status Complete(const GetOrCreateJobResponse& job, uint64_t epoch, int64_t split) {
    ReportSplitsRequest done;
    done.set_job_id(job.job_id());
    done.set_client_id(job.client_id());
    done.set_epoch(epoch);
    done.add_completed(split);
    return state_.ReportSplits(done, kT0);
  }
  // The job's client says, at `now`, that it reads `epoch`.
  absl::Status Reads(const GetOrCreateJobResponse& job, uint64_t epoch, absl::Time now) {
    ClientHeartbeatRequest hb;
    hb.set_job_id(job.job_id());
    hb.set_client_id(job.client_id());
    hb.set_epoch(epoch);
    return state_.ClientHeartbeat(hb, now).status();
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
  EXPECT_THAT(
      state_.GetOrCreateJob(other_mode, "", kT0),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("job 'shared' exists with mode DISTRIBUTED_EPOCH (this one asks for PARALLEL_EPOCHS)")));
  GetOrCreateJobRequest other_pipeline;
  other_pipeline.set_pipeline_id(b);
  other_pipeline.set_job_name("shared");
  EXPECT_THAT(state_.GetOrCreateJob(other_pipeline, "", kT0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("job 'shared' exists with another pipeline (" + a + "; this one is " + b)));
  GetOrCreateJobRequest unknown;
  unknown.set_pipeline_id("feed");
  EXPECT_THAT(state_.GetOrCreateJob(unknown, "", kT0),
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

TEST_F(DispatcherStateTest, AWorkerThatRefusedACallIsPassedOverForItsOps) {
  Worker("plugged:1", kT0, 0, {"random_cutout"});
  Worker("plugged:2", kT0, 0, {"random_cutout"});
  Worker("plain:3", kT0, 0, {"rescale"});
  ASSERT_OK_AND_ASSIGN(std::string other, state_.CapableWorker({"random_cutout"}, {"plugged:1"}));
  EXPECT_EQ(other, "plugged:2");
  EXPECT_THAT(state_.CapableWorker({"random_cutout"}, {"plugged:1", "plugged:2"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'random_cutout' is not registered on the dispatcher and no live worker has it (3 "
                                 "workers, 2 of them refusing connections")));
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
  // The log's line for it, once.
  EXPECT_THAT(state_.TakeDropped(),
              ElementsAre(AllOf(HasSubstr(absl::StrCat("worker ", w1, " at a:1 lost")), HasSubstr("silent for 10s"))));
  EXPECT_TRUE(state_.TakeDropped().empty());
  ASSERT_OK_AND_ASSIGN(tasks, state_.ClientHeartbeat(hb, later));
  ASSERT_EQ(tasks.tasks_size(), 1);
  EXPECT_EQ(tasks.tasks(0).worker_address(), "b:2");
  ASSERT_OK_AND_ASSIGN(GetSplitResponse rerun, state_.GetSplit(Ask(job, w2), later));
  EXPECT_EQ(rerun.split(), 0);
}

// A stopped consumer (SIGSTOP) keeps its streams open, and their workers go
// on asking for its splits; only its own calls keep it alive, so it is
// dropped after its timeout and the split it held goes to the other
// consumer at once, not when the split's lease runs out.
TEST_F(DispatcherStateTest, AWorkersAsksForASilentClientDoNotKeepItAlive) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(2)));
  const int64_t w = Worker("a:1");
  const GetOrCreateJobResponse stopped = Job(p, "train");
  const GetOrCreateJobResponse other = Job(p, "train");
  ASSERT_OK_AND_ASSIGN(GetSplitResponse held, state_.GetSplit(Ask(stopped, w), kT0));
  ASSERT_OK_AND_ASSIGN(GetSplitResponse taken, state_.GetSplit(Ask(other, w), kT0));
  ASSERT_EQ(held.state(), GetSplitResponse::SPLIT);
  ASSERT_EQ(taken.state(), GetSplitResponse::SPLIT);
  ReportSplitsRequest done;
  done.set_job_id(other.job_id());
  done.set_client_id(other.client_id());
  done.add_completed(taken.split());
  ClientHeartbeatRequest hb;
  hb.set_job_id(other.job_id());
  hb.set_client_id(other.client_id());
  const absl::Time later = kT0 + absl::Seconds(6);  // past the 5 s default
  SLUICE_ASSERT_OK(state_.ReportSplits(done, later));
  SLUICE_ASSERT_OK(state_.ClientHeartbeat(hb, later).status());
  ASSERT_OK_AND_ASSIGN(GetSplitResponse wait, state_.GetSplit(Ask(stopped, w), later));
  EXPECT_EQ(wait.state(), GetSplitResponse::WAIT);
  Worker("a:1", later, w);
  SLUICE_ASSERT_OK(state_.Expire(later));
  EXPECT_THAT(state_.TakeDropped(),
              ElementsAre(AllOf(HasSubstr(absl::StrCat("client ", stopped.client_id(), " of job ", stopped.job_id(),
                                                       " dropped: silent for 6s")),
                                HasSubstr("other consumers"))));
  ASSERT_OK_AND_ASSIGN(GetSplitResponse rerun, state_.GetSplit(Ask(other, w), later));
  EXPECT_EQ(rerun.state(), GetSplitResponse::SPLIT);
  EXPECT_EQ(rerun.split(), held.split());
}

TEST_F(DispatcherStateTest, ClientsLearnEachWorkersCores) {
  // A client opens a stream per core of a worker for one-record splits.
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(3)));
  const GetOrCreateJobResponse job = Job(p);
  WorkerHeartbeatRequest w;
  w.set_address("a:1");
  w.set_cores(6);
  SLUICE_ASSERT_OK(state_.WorkerHeartbeat(w, kT0).status());
  ClientHeartbeatRequest hb;
  hb.set_job_id(job.job_id());
  hb.set_client_id(job.client_id());
  ASSERT_OK_AND_ASSIGN(ClientHeartbeatResponse tasks, state_.ClientHeartbeat(hb, kT0));
  ASSERT_EQ(tasks.tasks_size(), 1);
  EXPECT_EQ(tasks.tasks(0).worker_cores(), 6);
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
  ASSERT_OK_AND_ASSIGN(GetOrCreateJobResponse rejoined, restarted.GetOrCreateJob(named, "", kT0));
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
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("is unknown")))
      << "silent 6 s since it was heard";
}

// A dispatcher stopped for 15 s (SIGSTOP, a paused VM) counted its own
// stall as everyone's silence: it dropped its workers and clients, and the
// clients' epochs failed as "unknown to the dispatcher".
TEST_F(DispatcherStateTest, TheDispatchersOwnStallIsNoOnesSilence) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(3)));
  const GetOrCreateJobResponse job = Job(p);
  Worker("a:1");
  const absl::Time woke = kT0 + absl::Seconds(15);  // both timeouts are 5 s
  state_.ForgiveStall(absl::Seconds(15), woke);
  SLUICE_ASSERT_OK(state_.Expire(woke));
  EXPECT_EQ(state_.Status(woke).workers_size(), 1);
  ClientHeartbeatRequest hb;
  hb.set_job_id(job.job_id());
  hb.set_client_id(job.client_id());
  SLUICE_EXPECT_OK(state_.ClientHeartbeat(hb, woke).status());
  EXPECT_THAT(state_.TakeDropped(), ElementsAre(HasSubstr("did not run for 15s")));
  // Silence after it still counts: the worker, unheard since, is lost.
  SLUICE_ASSERT_OK(state_.Expire(woke + absl::Seconds(6)));
  EXPECT_EQ(state_.Status(woke + absl::Seconds(6)).workers_size(), 0);
}

TEST_F(DispatcherStateTest, AWorkerIdIsNeverHandedToAnotherWorker) {
  const int64_t a = Worker("a:1");
  DispatcherState restarted({}, nullptr);
  for (const JournalEntry& e : journal_) restarted.Apply(e);
  WorkerHeartbeatRequest b;
  b.set_address("b:2");
  ASSERT_OK_AND_ASSIGN(WorkerHeartbeatResponse b_id, restarted.WorkerHeartbeat(b, kT0));
  EXPECT_NE(b_id.worker_id(), a) << "a new worker before the old one is back";
  WorkerHeartbeatRequest hijack;  // another process claiming a's id
  hijack.set_worker_id(a);
  hijack.set_address("evil:1");
  EXPECT_THAT(restarted.WorkerHeartbeat(hijack, kT0),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("worker id " + std::to_string(a) + " is another worker's")));
  hijack.set_secret("guess");
  EXPECT_THAT(restarted.WorkerHeartbeat(hijack, kT0),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("a wrong secret")));
  WorkerHeartbeatRequest back;
  back.set_worker_id(a);
  back.set_address("a:1");
  back.set_secret(secrets_[a]);
  ASSERT_OK_AND_ASSIGN(WorkerHeartbeatResponse a_id, restarted.WorkerHeartbeat(back, kT0));
  EXPECT_EQ(a_id.worker_id(), a) << "the old worker keeps its id";
  EXPECT_EQ(restarted.Status(kT0).workers_size(), 2) << "the hijack registered nothing";
  WorkerHeartbeatRequest stranger;
  stranger.set_worker_id(99);  // from a dispatcher that kept no journal
  stranger.set_address("c:3");
  ASSERT_OK_AND_ASSIGN(WorkerHeartbeatResponse c_id, restarted.WorkerHeartbeat(stranger, kT0));
  EXPECT_NE(c_id.worker_id(), 99);
  EXPECT_NE(c_id.worker_id(), b_id.worker_id());
}

// A drained worker's last heartbeat can reach the dispatcher after its
// leave; it must not bring the worker back until the worker timeout.
TEST_F(DispatcherStateTest, AHeartbeatHeardAfterAWorkersLeaveDoesNotBringItBack) {
  const int64_t a = Worker("a:1");
  Worker("b:2");
  WorkerHeartbeatRequest leave;
  leave.set_worker_id(a);
  leave.set_address("a:1");
  leave.set_secret(secrets_[a]);
  leave.set_leaving(true);
  SLUICE_ASSERT_OK(state_.WorkerHeartbeat(leave, kT0).status());
  EXPECT_EQ(state_.workers(), 1);
  EXPECT_EQ(Worker("a:1", kT0, a), a);
  EXPECT_EQ(state_.workers(), 1) << "the overtaken heartbeat registered it again";
}

// Reusing a job's name once its consumers left starts the epochs afresh
// (before, it yielded nothing); joining a live job whose epoch is over is
// an error naming it, never an empty epoch.
TEST_F(DispatcherStateTest, ANamedJobWithoutConsumersStartsAfreshAndAFinishedEpochIsNoEmptyOne) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(1)));
  const int64_t w = Worker("a:1");
  const GetOrCreateJobResponse first = Job(p, "train");
  ASSERT_OK_AND_ASSIGN(GetSplitResponse got, state_.GetSplit(Ask(first, w), kT0));
  ASSERT_EQ(got.state(), GetSplitResponse::SPLIT);
  ReportSplitsRequest done;
  done.set_job_id(first.job_id());
  done.set_client_id(first.client_id());
  done.add_completed(0);
  SLUICE_ASSERT_OK(state_.ReportSplits(done, kT0));

  const GetOrCreateJobResponse late = Job(p, "train");  // epoch 0 is over
  EXPECT_EQ(late.job_id(), first.job_id());
  EXPECT_THAT(state_.GetSplit(Ask(late, w), kT0), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                           HasSubstr("job " + std::to_string(first.job_id()) +
                                                                     " ('train') had finished epoch 0 before "
                                                                     "client " +
                                                                     std::to_string(late.client_id()) + " joined it")));
  ASSERT_OK_AND_ASSIGN(GetSplitResponse next_epoch, state_.GetSplit(Ask(late, w, /*epoch=*/1), kT0));
  EXPECT_EQ(next_epoch.state(), GetSplitResponse::SPLIT);

  for (const GetOrCreateJobResponse& c : {first, late}) {
    ReleaseClientRequest release;
    release.set_job_id(c.job_id());
    release.set_client_id(c.client_id());
    SLUICE_ASSERT_OK(state_.ReleaseClient(release));
  }
  EXPECT_EQ(state_.Status(kT0).jobs_size(), 0) << "a job no one reads is gone";
  const GetOrCreateJobResponse again = Job(p, "train");
  EXPECT_NE(again.job_id(), first.job_id());
  ASSERT_OK_AND_ASSIGN(GetSplitResponse fresh, state_.GetSplit(Ask(again, w), kT0));
  EXPECT_EQ(fresh.state(), GetSplitResponse::SPLIT);
  EXPECT_EQ(fresh.split(), 0);
}

TEST_F(DispatcherStateTest, EpochsEveryClientIsPastAndIdlePipelinesAreForgotten) {
  ASSERT_OK_AND_ASSIGN(std::string used, state_.RegisterPipeline(Def(4), Splits(1)));
  ASSERT_OK_AND_ASSIGN(std::string idle, state_.RegisterPipeline(Def(5), Splits(1)));
  const GetOrCreateJobResponse job = Job(used);
  const int64_t w = Worker("a:1");
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    ASSERT_OK_AND_ASSIGN(GetSplitResponse got, state_.GetSplit(Ask(job, w, epoch), kT0));
    SLUICE_ASSERT_OK(Complete(job, epoch, got.split()));
  }
  const absl::Time later = absl::Now() + absl::Minutes(11);
  SLUICE_ASSERT_OK(Reads(job, 2, later));
  Worker("a:1", later, w);
  SLUICE_ASSERT_OK(state_.Expire(later));
  const std::vector<JournalEntry> snapshot = state_.Snapshot();
  std::vector<uint64_t> epochs;
  for (const JournalEntry& e : snapshot) {
    if (e.has_splits_completed()) epochs.push_back(e.splits_completed().epoch());
  }
  EXPECT_EQ(epochs, std::vector<uint64_t>{2}) << "epochs 0 and 1 are over for every client";
  EXPECT_NE(state_.FindPipeline(used), nullptr);
  EXPECT_EQ(state_.FindPipeline(idle), nullptr) << "idle for 11 minutes";
}

// An epoch forgotten once every client was past it is still over: a
// consumer joining the job later and asking for it got all of its samples
// again (the epoch started afresh).
TEST_F(DispatcherStateTest, AnEpochForgottenIsNotHandedOutAgainToAConsumerJoiningLater) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(1)));
  const int64_t w = Worker("a:1");
  const GetOrCreateJobResponse first = Job(p, "train");
  ASSERT_OK_AND_ASSIGN(GetSplitResponse got, state_.GetSplit(Ask(first, w), kT0));
  SLUICE_ASSERT_OK(Complete(first, 0, got.split()));
  SLUICE_ASSERT_OK(Reads(first, 1, kT0));
  SLUICE_ASSERT_OK(state_.Expire(kT0));  // every client is past epoch 0: it is forgotten

  const GetOrCreateJobResponse late = Job(p, "train");
  EXPECT_EQ(late.job_id(), first.job_id());
  EXPECT_THAT(state_.GetSplit(Ask(late, w), kT0),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("had finished epoch 0 before client")));
  ASSERT_OK_AND_ASSIGN(GetSplitResponse next_epoch, state_.GetSplit(Ask(late, w, /*epoch=*/1), kT0));
  EXPECT_EQ(next_epoch.state(), GetSplitResponse::SPLIT);
}

// Each client tenant has its own job names and sees, reports and leaves
// only its own jobs; a client reports only the splits handed to it.
TEST_F(DispatcherStateTest, TenantsKeepToTheirJobsAndClientsToTheirSplits) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(2)));
  GetOrCreateJobRequest r;
  r.set_pipeline_id(p);
  r.set_job_name("train");
  ASSERT_OK_AND_ASSIGN(GetOrCreateJobResponse alice, state_.GetOrCreateJob(r, "alice", kT0));
  ASSERT_OK_AND_ASSIGN(GetOrCreateJobResponse bob, state_.GetOrCreateJob(r, "bob", kT0));
  EXPECT_NE(alice.job_id(), bob.job_id()) << "the same name, two tenants: two jobs";
  const Caller as_bob{Role::kClient, "bob", ""};
  EXPECT_THAT(state_.CheckTenant(alice.job_id(), as_bob),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("job " + std::to_string(alice.job_id()) + " is not tenant 'bob''s")));
  SLUICE_EXPECT_OK(state_.CheckTenant(bob.job_id(), as_bob));
  SLUICE_EXPECT_OK(state_.CheckTenant(alice.job_id(), Caller{Role::kAdmin, "root", ""}));
  const DispatcherStatus seen_by_bob = state_.Status(kT0, as_bob);
  ASSERT_EQ(seen_by_bob.jobs_size(), 1);
  EXPECT_EQ(seen_by_bob.jobs(0).job_id(), bob.job_id());
  EXPECT_EQ(state_.Status(kT0).jobs_size(), 2) << "an admin sees every job";

  const int64_t w = Worker("a:1");
  ASSERT_OK_AND_ASSIGN(GetSplitResponse got, state_.GetSplit(Ask(alice, w), kT0));
  ReportSplitsRequest forged;  // bob's client claims alice's split
  forged.set_job_id(alice.job_id());
  forged.set_client_id(bob.client_id());
  forged.add_completed(got.split());
  EXPECT_FALSE(state_.ReportSplits(forged, kT0).ok());
  GetOrCreateJobRequest join = r;
  ASSERT_OK_AND_ASSIGN(GetOrCreateJobResponse alice2, state_.GetOrCreateJob(join, "alice", kT0));
  forged.set_client_id(alice2.client_id());  // the same job, another client
  EXPECT_THAT(state_.ReportSplits(forged, kT0),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("reported split " + std::to_string(got.split()) +
                                                                      " of job " + std::to_string(alice.job_id()) +
                                                                      " epoch 0 finished, but it was not handed to "
                                                                      "that client")));
  forged.set_client_id(alice.client_id());
  SLUICE_EXPECT_OK(state_.ReportSplits(forged, kT0));
  SLUICE_EXPECT_OK(state_.ReportSplits(forged, kT0));  // a repeated report is fine
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
    return *restarted.GetOrCreateJob(r, "", kT0);
  }();
  EXPECT_GT(next.client_id(), leaver.client_id());
}

// A consumer killed after saving its state and restarted: its new client
// takes over the state's progress, the killed client is released, and a
// restart from the journal keeps all of it.
TEST_F(DispatcherStateTest, AResumedClientTakesOverItsSavedProgressAcrossARestart) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(4)));
  const GetOrCreateJobResponse killed = Job(p, "train");
  EXPECT_EQ(killed.job_uid().size(), 32u);
  const int64_t w = Worker("a:1");
  for (int i = 0; i < 3; ++i) SLUICE_ASSERT_OK(state_.GetSplit(Ask(killed, w), kT0).status());
  ReportSplitsRequest done;
  done.set_job_id(killed.job_id());
  done.set_client_id(killed.client_id());
  done.add_completed(0);
  done.add_completed(1);  // after the state was saved
  SLUICE_ASSERT_OK(state_.ReportSplits(done, kT0));

  const GetOrCreateJobResponse resumed = Job(p, "train");
  ResumeClientRequest r;
  r.set_job_id(resumed.job_id());
  r.set_client_id(resumed.client_id());
  r.add_done(0);
  r.add_partial(2);
  r.set_previous_job_uid(killed.job_uid());
  r.set_previous_client_id(killed.client_id());
  SLUICE_ASSERT_OK(state_.ResumeClient(r, kT0));
  EXPECT_EQ(state_.Status(kT0).jobs(0).clients(), 1);  // the killed client is gone
  r.add_done(4);
  EXPECT_THAT(state_.ResumeClient(r, kT0), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("split 4")));

  DispatcherState restarted({}, nullptr);
  for (const JournalEntry& e : journal_) restarted.Apply(e);
  for (DispatcherState* s : {&state_, &restarted}) {
    EXPECT_EQ(s->Status(kT0).jobs(0).splits_completed(), 1);
    GetSplitRequest ask = Ask(resumed, w);
    std::vector<int64_t> got;
    for (int i = 0; i < 3; ++i) {
      ask.set_seq(i + 1);
      ASSERT_OK_AND_ASSIGN(GetSplitResponse next, s->GetSplit(ask, kT0));
      got.push_back(next.split());
    }
    EXPECT_EQ(got, (std::vector<int64_t>{2, 1, 3}));  // the partial split first, then what the state lacks
  }
}

// A consumer resumed from a state, read on and died; resumed from the same
// state again, it gets back what its first resume did, also from a
// compacted journal.
TEST_F(DispatcherStateTest, ResumingTheSameStateAgainTakesBackWhatTheFirstResumeDid) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(4)));
  const GetOrCreateJobResponse saver = Job(p, "train");
  const int64_t w = Worker("a:1");
  SLUICE_ASSERT_OK(state_.GetSplit(Ask(saver, w), kT0).status());
  const GetOrCreateJobResponse again = ResumeTwice(p, saver.job_uid(), saver.client_id(), w);
  EXPECT_EQ(state_.Status(kT0).jobs(0).clients(), 1);  // the first resume's client is gone too

  DispatcherState restarted({}, nullptr);
  for (const JournalEntry& e : state_.Snapshot()) restarted.Apply(e);
  for (DispatcherState* s : {&state_, &restarted}) {
    EXPECT_EQ(s->Status(kT0).jobs(0).splits_completed(), 1);
    EXPECT_EQ(NextSplits(s, Ask(again, w), 3), (std::vector<int64_t>{1, 2, 3}));
  }
}

// A state saved in a job that has ended since (its trainer exited): its
// first resume starts another job; resumed again in that job, it takes
// back what the first resume did there, also from the journal replayed or
// compacted, and at a third resume.
TEST_F(DispatcherStateTest, AStateOfAnEndedJobResumedAgainTakesBackWhatItsFirstResumeDid) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(4)));
  const int64_t w = Worker("a:1");
  const std::string ended = "the uid of a job that ended";
  const GetOrCreateJobResponse again = ResumeTwice(p, ended, 7, w);
  EXPECT_EQ(state_.Status(kT0).jobs(0).clients(), 1);  // the first resume's client is gone

  DispatcherState replayed({}, nullptr), compacted({}, nullptr);
  for (const JournalEntry& e : journal_) replayed.Apply(e);
  for (const JournalEntry& e : state_.Snapshot()) compacted.Apply(e);
  for (DispatcherState* s : {&state_, &replayed, &compacted}) {
    EXPECT_EQ(s->Status(kT0).jobs(0).splits_completed(), 1);
    EXPECT_EQ(NextSplits(s, Ask(again, w), 3), (std::vector<int64_t>{1, 2, 3}));
  }
  GetOrCreateJobRequest join;
  join.set_pipeline_id(p);
  join.set_job_name("train");
  ASSERT_OK_AND_ASSIGN(const GetOrCreateJobResponse third, compacted.GetOrCreateJob(join, "", kT0));
  ResumeClientRequest r;
  r.set_job_id(third.job_id());
  r.set_client_id(third.client_id());
  r.add_done(0);
  r.set_previous_job_uid(ended);
  r.set_previous_client_id(7);
  SLUICE_ASSERT_OK(compacted.ResumeClient(r, kT0));
  EXPECT_EQ(compacted.Status(kT0).jobs(0).clients(), 1);  // the second resume's client is gone
}

// Ids restart with a dispatcher that kept no journal: a state's client of
// another job (by uid) is not this job's client of the same id.
TEST_F(DispatcherStateTest, AResumeNamingAnotherJobsClientTakesNothingFromIt) {
  ASSERT_OK_AND_ASSIGN(std::string p, state_.RegisterPipeline(Def(4), Splits(2)));
  const GetOrCreateJobResponse other = Job(p, "train");
  const int64_t w = Worker("a:1");
  SLUICE_ASSERT_OK(state_.GetSplit(Ask(other, w), kT0).status());
  const GetOrCreateJobResponse resumed = Job(p, "train");
  ResumeClientRequest r;
  r.set_job_id(resumed.job_id());
  r.set_client_id(resumed.client_id());
  r.set_previous_job_uid("an earlier dispatcher's job");
  r.set_previous_client_id(other.client_id());
  SLUICE_ASSERT_OK(state_.ResumeClient(r, kT0));
  EXPECT_EQ(state_.Status(kT0).jobs(0).clients(), 2);
  ASSERT_OK_AND_ASSIGN(GetSplitResponse next, state_.GetSplit(Ask(resumed, w), kT0));
  EXPECT_EQ(next.split(), 1);  // split 0 stays the other client's
}

}  // namespace
}  // namespace sluice::service
