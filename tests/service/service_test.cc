// The service end to end: real dispatcher and worker processes on
// 127.0.0.1, the client in this process. Each sample carries its id, so
// every test checks which samples arrived how often.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "service.grpc.pb.h"
#include "service_samples.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"
#include "sluice/service/dispatcher_impl.h"
#include "sluice/service/distributed_pipeline.h"
#include "sluice/service/fetch_status.h"
#include "sluice/service/grpc_status.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_cluster.h"
#include "test_data.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::sluice::testing::StatusOf;
using ::sluice::testing::TestCluster;
using ::testing::HasSubstr;
using ::testing::Not;

class ServiceTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

// gRPC's SO_REUSEPORT would let the second start and take a share of the
// first's calls.
TEST_F(ServiceTest, AServerOnAPortInUseFailsToStartRatherThanShareIt) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  const char* bin = std::getenv("SLUICE_BIN");
  ASSERT_NE(bin, nullptr);
  for (const char* role : {"dispatcher", "worker"}) {
    std::vector<std::string> args{role, "--host", "127.0.0.1", "--port", std::to_string(cluster.dispatcher().port())};
    if (std::string(role) == "worker") args.insert(args.end(), {"--dispatcher", cluster.address()});
    EXPECT_FALSE(ServerProcess::Start(bin, args).ok()) << role << " started on a port in use";
  }
}

// gRPC answers a call the server lacks with UNIMPLEMENTED and no message.
TEST_F(ServiceTest, AWorkersAddressGivenForTheDispatchersSaysWhatItMayBe) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  EXPECT_THAT(service::FetchDispatcherStatus("127.0.0.1:" + std::to_string(cluster.worker(0).port()), {}).status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("a worker's given for the dispatcher's")));
}

TEST_F(ServiceTest, DistributedEpochDeliversEachSampleOnceParallelEpochsOncePerWorker) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  ASSERT_OK_AND_ASSIGN(auto distributed, CreatePipeline(Distributed(cluster.address())));
  ASSERT_OK_AND_ASSIGN(Received once, ReadEpoch(*distributed));
  ExpectEachIdTimes(once, 1);
  EXPECT_EQ(distributed->Cardinality(), (kRows + 63) / 64);

  ASSERT_OK_AND_ASSIGN(auto parallel, CreatePipeline(Distributed(cluster.address(), "parallel_epochs")));
  ASSERT_OK_AND_ASSIGN(Received twice, ReadEpoch(*parallel));
  ExpectEachIdTimes(twice, 2);
}

TEST_F(ServiceTest, TheServiceYieldsWhatTheLocalRunYields) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  ASSERT_OK_AND_ASSIGN(auto distributed, CreatePipeline(Distributed(cluster.address())));
  ASSERT_OK_AND_ASSIGN(auto local, exec::Pipeline::Create(Samples().Batch(64).Build()));
  for (uint64_t epoch : {0, 1}) {
    ASSERT_OK_AND_ASSIGN(Received remote, ReadEpoch(*distributed, epoch));
    ASSERT_OK_AND_ASSIGN(Received here, ReadEpoch(*local, epoch));
    EXPECT_TRUE(remote.images_by_id == here.images_by_id) << "epoch " << epoch;  // random flips included
  }
}

// The samples a worker process has sent. It counts a batch once its write
// returned, which may be after the consumer has it: the count is waited
// for (up to 10 s) when it is not yet `expected`.
int64_t SamplesSent(const testing::ServiceProcess& worker, int64_t expected = -1) {
  int64_t sent = StatusOf(worker).samples_sent();
  for (int tries = 0; sent != expected && expected >= 0 && tries < 200; ++tries) {
    absl::SleepFor(absl::Milliseconds(50));
    sent = StatusOf(worker).samples_sent();
  }
  return sent;
}

PipelineDef WithCutout(const std::string& dispatcher) {
  DistributeOptions d;
  d.dispatcher = dispatcher;
  d.connect_timeout_s = 5;
  return Samples().Map({Op("random_cutout", {{"size", 4}})}).Distribute(d).Batch(64).Build();
}

TEST_F(ServiceTest, APluginsOpRunsOnlyOnTheWorkersThatLoadedThePlugin) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  SLUICE_ASSERT_OK(cluster.AddWorker(1, {"--plugin", std::getenv("SLUICE_EXAMPLE_PLUGIN")}));
  SLUICE_ASSERT_OK(cluster.AddWorker(1));
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(WithCutout(cluster.address())));
  ASSERT_OK_AND_ASSIGN(Received r, ReadEpoch(*pipeline));
  ExpectEachIdTimes(r, 1);
  EXPECT_EQ(SamplesSent(cluster.worker(0), kRows), kRows) << "the worker with the plugin ran every split";
  EXPECT_EQ(SamplesSent(cluster.worker(1)), 0) << "the worker without it got none";
}

TEST_F(ServiceTest, WithoutAWorkerThatHasItsOpsAPipelineIsRefusedNamingTheOp) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  SLUICE_ASSERT_OK(cluster.AddWorker(1));
  EXPECT_THAT(CreatePipeline(WithCutout(cluster.address())),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'random_cutout' is not registered on the dispatcher and no live worker has it")));
}

TEST_F(ServiceTest, WithItsOnlyCapableWorkerJustKilledAPipelineIsRefusedNamingTheOp) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  SLUICE_ASSERT_OK(cluster.AddWorker(1, {"--plugin", std::getenv("SLUICE_EXAMPLE_PLUGIN")}));
  SLUICE_ASSERT_OK(cluster.AddWorker(1));
  cluster.worker(0).Stop(SIGKILL);  // its heartbeats have likely not timed out yet
  // Whether the dispatcher still counts the killed worker ("2 workers, 1 of
  // them refusing connections") or has dropped it ("1 workers") depends on
  // how busy the machine is; either way the error names the op, never the
  // refused connection.
  const absl::StatusOr<std::unique_ptr<exec::Pipeline>> created = CreatePipeline(WithCutout(cluster.address()));
  EXPECT_THAT(created, StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("op 'random_cutout' is not registered on the dispatcher and no live worker "
                                          "has it")));
  EXPECT_THAT(created.status().message(), Not(HasSubstr("Connection refused")));
}

TEST_F(ServiceTest, AWorkerKilledMidEpochLosesAndRepeatsNothing) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Distributed(cluster.address())));
  ASSERT_OK_AND_ASSIGN(Received r, ReadEpoch(*pipeline, 0, 40, [&] { cluster.worker(0).Stop(SIGKILL); }));
  ExpectEachIdTimes(r, 1);
}

// SIGTERM drains a worker: its streams end after their current split, it
// leaves the dispatcher at once (not after the worker timeout) and exits 0.
TEST_F(ServiceTest, AWorkerStoppedWithSigtermFinishesItsSplitLeavesAndExitsZero) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Distributed(cluster.address())));
  int exit_status = -1;
  absl::StatusOr<DispatcherStatus> after_stop = absl::UnknownError("not stopped");
  ASSERT_OK_AND_ASSIGN(Received r, ReadEpoch(*pipeline, 0, 40, [&] {
                         exit_status = cluster.worker(0).Stop(SIGTERM);
                         after_stop = service::FetchDispatcherStatus(cluster.address(), {});
                       }));
  ExpectEachIdTimes(r, 1);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
  SLUICE_ASSERT_OK(after_stop.status());
  EXPECT_EQ(after_stop->workers_size(), 1) << "it left at once (the worker timeout is 2 s)";
}

// Killed, or stopped as a rollout or a supervisor stops it (SIGTERM: its
// calls in flight end CANCELLED, which failed every consumer at once).
TEST_F(ServiceTest, ADispatcherRestartedFromItsWorkDirFinishesTheEpochExactlyOnce) {
  for (const int signal : {SIGKILL, SIGTERM}) {
    SCOPED_TRACE(signal);
    TestCluster cluster;
    const std::string work = dir_.Join(absl::StrCat("work", signal));
    SLUICE_ASSERT_OK(cluster.StartDispatcher(work));
    SLUICE_ASSERT_OK(cluster.AddWorker());
    SLUICE_ASSERT_OK(cluster.AddWorker());
    ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Distributed(cluster.address())));
    absl::Status restarted;
    ASSERT_OK_AND_ASSIGN(Received r,
                         ReadEpoch(*pipeline, 0, 40, [&] { restarted = cluster.RestartDispatcher(signal, work); }));
    SLUICE_ASSERT_OK(restarted);
    ExpectEachIdTimes(r, 1);
  }
}

// The dispatcher gone for longer than heartbeats take to notice, while the
// consumer keeps reading: once it is back, the epoch finishes exactly once.
TEST_F(ServiceTest, ADispatcherOutageOfSecondsMidEpochLosesAndRepeatsNothing) {
  TestCluster cluster;
  const std::string work = dir_.Join("work");
  SLUICE_ASSERT_OK(cluster.StartDispatcher(work));
  SLUICE_ASSERT_OK(cluster.AddWorker());
  SLUICE_ASSERT_OK(cluster.AddWorker());
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Distributed(cluster.address())));
  absl::Status restarted;
  std::thread outage;
  ASSERT_OK_AND_ASSIGN(
      Received r, ReadEpoch(*pipeline, 0, 20, [&] {
        outage = std::thread([&] { restarted = cluster.RestartDispatcher(SIGKILL, work, absl::Seconds(9)); });
      }));
  outage.join();
  SLUICE_ASSERT_OK(restarted);
  ExpectEachIdTimes(r, 1);
}

// A dispatcher restarted without its journal has forgotten the job: the
// consumer gets an error saying so, never an endless wait.
TEST_F(ServiceTest, ADispatcherThatLostItsStateFailsTheEpochSayingSo) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Distributed(cluster.address())));
  absl::Status restarted;
  const absl::StatusOr<Received> read =
      ReadEpoch(*pipeline, 0, 20, [&] { restarted = cluster.RestartDispatcher(SIGKILL, ""); });
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(std::string(read.status().message()),
              ::testing::AnyOf(HasSubstr("no longer knows client"), HasSubstr("is unknown")));
  SLUICE_ASSERT_OK(restarted);
}

TEST_F(ServiceTest, ADispatcherGoneForLongerThanTheTimeoutFailsTheEpochSayingSo) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  DistributeOptions d;
  d.dispatcher = cluster.address();
  d.connect_timeout_s = 5;
  d.dispatcher_timeout_s = 1;
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Samples().Distribute(d).Batch(64).Build()));
  EXPECT_THAT(ReadEpoch(*pipeline, 0, 20, [&] { cluster.dispatcher().Stop(SIGKILL); }),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("the dispatcher at " + cluster.address() + " has been unreachable for 1s")));
  // The next epoch of the same pipeline failed at once with the same words,
  // though the dispatcher might be back: they say what to do.
  EXPECT_THAT(ReadEpoch(*pipeline, 1),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("make the pipeline again to join anew")));
}

// A hung dispatcher (stopped: its connections open, no answer) holds each
// call to its deadline of 10 s; the consumer still fails once
// dispatcher_timeout_s has passed since the first call went unanswered, not
// a deadline later (it took 11 s for a timeout of 1, and a retry's deadline
// ran 8 s past one of 12).
TEST_F(ServiceTest, AHungDispatcherFailsTheEpochOnceTheTimeoutHasPassed) {
  for (const int timeout_s : {1, 12}) {
    SCOPED_TRACE(timeout_s);
    TestCluster cluster;
    SLUICE_ASSERT_OK(StartCluster(cluster, 1));
    DistributeOptions d;
    d.dispatcher = cluster.address();
    d.connect_timeout_s = 5;
    d.dispatcher_timeout_s = timeout_s;
    ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Samples().Distribute(d).Batch(64).Build()));
    absl::Time stopped = absl::InfiniteFuture();
    const absl::StatusOr<Received> read = ReadEpoch(*pipeline, 0, 20, [&] {
      stopped = absl::Now();
      kill(cluster.dispatcher().pid(), SIGSTOP);
    });
    const absl::Duration waited = absl::Now() - stopped;
    kill(cluster.dispatcher().pid(), SIGCONT);
    EXPECT_THAT(read, StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr(absl::StrCat("has been unreachable for ", timeout_s, "s"))));
    EXPECT_LT(waited, absl::Seconds(timeout_s + 5)) << "a call's deadline ran past the timeout";
  }
}

// A sample that crashes the worker running it would kill every worker in
// turn: after three tries its split fails the epoch, naming its records,
// or under on_corrupt "skip" is skipped and counted.
TEST_F(ServiceTest, ASplitThatKillsItsWorkersFailsTheEpochOrIsSkipped) {
  const std::string plugin = std::string(std::getenv("SLUICE_TEST_PLUGINS")) + "/libtest_plugin_failing.so";
  for (const bool skip : {false, true}) {
    SCOPED_TRACE(skip ? "skip" : "error");
    TestCluster cluster;
    SLUICE_ASSERT_OK(cluster.StartDispatcher());
    for (int i = 0; i < 4; ++i) SLUICE_ASSERT_OK(cluster.AddWorker(1, {"--plugin", plugin}));
    PipelineBuilder b = Samples();
    b.Map({Op("fail_at_label", {{"field", "id"}, {"label", 12345}, {"crash", true}})});
    if (skip) b.SkipCorruptRecords();
    DistributeOptions d;
    d.dispatcher = cluster.address();
    d.connect_timeout_s = 5;
    ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(b.Distribute(d).Batch(64).Build()));
    const absl::StatusOr<Received> read = ReadEpoch(*pipeline);
    if (!skip) {
      EXPECT_THAT(read, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("job ")));
      EXPECT_THAT(read.status().message(), HasSubstr(": split 123 failed 3 times ("));
      EXPECT_THAT(read.status().message(),
                  HasSubstr("): a sample in it may crash the pipeline (it holds records 12300 to 12399 of <arrays>)"));
      continue;
    }
    SLUICE_ASSERT_OK(read.status());
    EXPECT_EQ(read->count.size(), static_cast<size_t>(kRows - 100));
    EXPECT_EQ(read->count.count(12345), 0u);
    EXPECT_EQ(read->skipped, 100);
  }
}

// The dispatcher pins the files a pattern names when the pipeline is
// registered; workers read exactly those. A file added before the workers
// compile (one that sorts first: every file's index would shift) is not
// read, and nothing is read twice or missed.
TEST_F(ServiceTest, WorkersReadTheFilesPinnedAtRegistrationNotWhatTheFolderHoldsLater) {
  auto write = [&](const std::string& name, int first) {
    std::vector<std::string> records;
    for (int id = first; id < first + 50; ++id) records.push_back(testing::MakeExample("x", id));
    testing::WriteTfRecords(dir_.Join(name), records);
  };
  write("b.tfrecord", 0);
  write("c.tfrecord", 100);
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  DistributeOptions d;
  d.dispatcher = cluster.address();
  d.connect_timeout_s = 5;
  ASSERT_OK_AND_ASSIGN(auto pipeline,
                       CreatePipeline(PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")})
                                          .Distribute(d)
                                          .Batch(16)
                                          .Build()));
  write("a.tfrecord", 1000);  // after registration, before any worker compiles
  auto it = pipeline->Iterate(0);
  std::map<int64_t, int> seen;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&b, &end));
    if (end) break;
    for (int64_t r = 0; r < b.rows; ++r) ++seen[b.columns[0].values.data<int64_t>()[r]];
  }
  ASSERT_EQ(seen.size(), 100u);
  for (const auto& [id, n] : seen) {
    EXPECT_TRUE(id < 50 || (id >= 100 && id < 150)) << id << " is from the file added later";
    EXPECT_EQ(n, 1) << id;
  }
}

// A sample on which a kernel never returns: its split makes no progress,
// its lease runs out, and once it failed --max-split-failures times the
// epoch fails naming it, instead of waiting forever.
TEST_F(ServiceTest, ASplitStuckInAKernelFailsTheEpochInsteadOfHangingIt) {
  const std::string plugin = std::string(std::getenv("SLUICE_TEST_PLUGINS")) + "/libtest_plugin_failing.so";
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher("", 0, {"--split-lease", "1", "--max-split-failures", "1"}));
  for (int i = 0; i < 2; ++i) SLUICE_ASSERT_OK(cluster.AddWorker(1, {"--plugin", plugin, "--drain-timeout", "1"}));
  PipelineBuilder b = Samples();
  b.Map({Op("fail_at_label", {{"field", "id"}, {"label", 345}, {"hang", true}})});
  DistributeOptions d;
  d.dispatcher = cluster.address();
  d.connect_timeout_s = 5;
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(b.Distribute(d).Batch(64).Build()));
  EXPECT_THAT(ReadEpoch(*pipeline),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("split 3 failed 1 time (it made no progress for 1s): a sample in it may crash "
                                 "the pipeline (it holds records 300 to 399 of <arrays>)")));
}

// The workers batch; the client hands their batches on, but a split's last
// batch (short: drop_remainder false) waits in the client for the next
// split's rows or the epoch's end, which the workers send only once every
// split is reported done. So the client reports the split before it waits,
// not after. Here the worker has sent the whole split before the consumer
// takes its last rows: the report used to wait for the split's lease to
// run out, and the split ran again.
TEST_F(ServiceTest, ASplitsLastRowsWaitingForTheEpochsEndDoNotWaitForItsLease) {
  constexpr int kTotal = 300, kBatch = 128;
  std::vector<int64_t> ids(kTotal);
  for (int i = 0; i < kTotal; ++i) ids[i] = i;
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher("", 0, {"--split-lease", "60"}));
  SLUICE_ASSERT_OK(cluster.AddWorker());
  DistributeOptions d;
  d.dispatcher = cluster.address();
  d.connect_timeout_s = 5;
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(PipelineBuilder::Arrays({MakeArrayColumn("id", {}, ids)})
                                                         .Batch(kBatch, /*drop_remainder=*/false)
                                                         .Distribute(d)
                                                         .Build()));
  std::unique_ptr<exec::PipelineIterator> it = pipeline->Iterate(0);
  std::map<int64_t, int> count;
  std::vector<int64_t> rows;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&b, &end));
    if (end) break;
    rows.push_back(b.rows);
    for (int64_t r = 0; r < b.rows; ++r) ++count[b.columns[0].values.data<int64_t>()[r]];
    if (rows.size() > 1) continue;
    // The rest of the split, sent while the consumer holds its first batch.
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (StatusOf(cluster.worker(0)).samples_sent() < kTotal && absl::Now() < give_up)
      absl::SleepFor(absl::Milliseconds(10));
    // And its split's end marker, which follows the rows, has arrived too
    // (nothing tells: this sleep only makes the case likely, the test
    // passes either way when the client is right).
    absl::SleepFor(absl::Milliseconds(300));
  }
  EXPECT_THAT(rows, ::testing::ElementsAre(kBatch, kBatch, kTotal - 2 * kBatch));
  EXPECT_EQ(count.size(), static_cast<size_t>(kTotal));
  EXPECT_TRUE(std::all_of(count.begin(), count.end(), [](const auto& c) { return c.second == 1; }));
  EXPECT_EQ(StatusOf(cluster.worker(0)).samples_sent(), kTotal) << "the split ran again";
}

// Under on_corrupt "skip", what a worker skips (a corrupt record, a row a
// kernel refuses) is counted by the client, file by file: nothing is
// dropped unseen because it was dropped remotely.
TEST_F(ServiceTest, WhatWorkersSkipIsCountedByTheClient) {
  const std::string plugin = std::string(std::getenv("SLUICE_TEST_PLUGINS")) + "/libtest_plugin_failing.so";
  const std::string file = dir_.Join("ids.tfrecord");
  std::vector<std::string> records;
  size_t offset = 0;
  for (int id = 0; id < 50; ++id) {
    records.push_back(testing::MakeExample("x", id));
    if (id < 10) offset += 16 + records.back().size();
  }
  testing::WriteTfRecords(file, records);
  testing::IncrementByte(file, offset + 12 + 3);  // record 10's data: its CRC fails
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  SLUICE_ASSERT_OK(cluster.AddWorker(1, {"--plugin", plugin}));
  DistributeOptions d;
  d.dispatcher = cluster.address();
  d.connect_timeout_s = 5;
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(PipelineBuilder::TfRecord({file}, {Int64Feature("label")})
                                                         .SkipCorruptRecords()
                                                         .Map({Op("fail_at_label", {{"label", 20}})})
                                                         .Distribute(d)
                                                         .Batch(8)
                                                         .Build()));
  auto it = pipeline->Iterate(0);
  std::set<int64_t> ids;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&b, &end));
    if (end) break;
    for (int64_t r = 0; r < b.rows; ++r) ids.insert(b.columns[0].values.data<int64_t>()[r]);
  }
  EXPECT_EQ(ids.size(), 48u);
  EXPECT_EQ(ids.count(10) + ids.count(20), 0u);
  EXPECT_EQ(it->skipped().skipped(), 2);
  EXPECT_THAT(it->skipped().Summary(), HasSubstr(file + ": 2 records"));
  EXPECT_THAT(it->skipped().Summary(), HasSubstr("label 20 is poison in record 20 of " + file));
}

TEST_F(ServiceTest, AWorkerJoiningMidJobTakesSplits) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Distributed(cluster.address())));
  absl::Status joined;
  ASSERT_OK_AND_ASSIGN(Received r, ReadEpoch(*pipeline, 0, 20, [&] { joined = cluster.AddWorker(); }));
  SLUICE_ASSERT_OK(joined);
  ExpectEachIdTimes(r, 1);
  // The newcomer serves the next epoch from its start.
  ASSERT_OK_AND_ASSIGN(Received next, ReadEpoch(*pipeline, 1));
  ExpectEachIdTimes(next, 1);
}

TEST_F(ServiceTest, CompressedBatchesEqualPlainOnes) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  ASSERT_OK_AND_ASSIGN(auto plain, CreatePipeline(Distributed(cluster.address())));
  ASSERT_OK_AND_ASSIGN(Received expected, ReadEpoch(*plain));
  for (const char* codec : {"zstd", "lz4"}) {
    ASSERT_OK_AND_ASSIGN(auto compressed,
                         CreatePipeline(Distributed(cluster.address(), "distributed_epoch", "", codec)));
    ASSERT_OK_AND_ASSIGN(Received got, ReadEpoch(*compressed));
    ExpectEachIdTimes(got, 1);
    EXPECT_TRUE(got.images_by_id == expected.images_by_id) << codec;
  }
}

// A worker on the client's host writes batches into the client's
// shared-memory ring; they equal what TCP carries, which is what every
// batch takes with the ring turned off.
TEST_F(ServiceTest, AWorkerOnThisHostHandsBatchesOverInSharedMemoryAndTheyEqualTcpOnes) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  ASSERT_OK_AND_ASSIGN(auto ring, CreatePipeline(Distributed(cluster.address())));
  ASSERT_OK_AND_ASSIGN(Received through_ring, ReadEpoch(*ring));
  ExpectEachIdTimes(through_ring, 1);
  EXPECT_EQ(StatusOf(cluster.worker(0)).samples_sent_shared_memory(), kRows);

  DistributeOptions d;
  d.dispatcher = cluster.address();
  d.shared_memory_mb = -1;
  ASSERT_OK_AND_ASSIGN(auto tcp, CreatePipeline(Samples().Distribute(d).Batch(64).Build()));
  ASSERT_OK_AND_ASSIGN(Received over_tcp, ReadEpoch(*tcp));
  ExpectEachIdTimes(over_tcp, 1);
  EXPECT_TRUE(through_ring.images_by_id == over_tcp.images_by_id);
  const WorkerStatus status = StatusOf(cluster.worker(0));
  EXPECT_EQ(status.samples_sent(), 2 * kRows);
  EXPECT_EQ(status.samples_sent_shared_memory(), kRows) << "the ring was off";
}

// A consumer that keeps every batch it gets fills its ring: the rest come
// over TCP, none lost, none waiting for room.
TEST_F(ServiceTest, AConsumerHoldingItsBatchesFillsTheRingAndTheRestComeOverTcp) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  DistributeOptions d;
  d.dispatcher = cluster.address();
  d.shared_memory_mb = 1;  // about 26 of the epoch's 400 batches
  // Batched by the workers: the client hands their batches on as they came.
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Samples().Batch(50).Distribute(d).Build()));
  std::unique_ptr<exec::PipelineIterator> it = pipeline->Iterate(0);
  std::vector<Batch> held;
  std::map<int64_t, int> count;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&b, &end));
    if (end) break;
    for (int64_t r = 0; r < b.rows; ++r) ++count[b.columns[0].values.data<int64_t>()[r]];
    held.push_back(std::move(b));
  }
  EXPECT_EQ(count.size(), static_cast<size_t>(kRows));
  EXPECT_TRUE(std::all_of(count.begin(), count.end(), [](const auto& c) { return c.second == 1; }));
  const int64_t via_ring = StatusOf(cluster.worker(0)).samples_sent_shared_memory();
  EXPECT_GT(via_ring, 0);
  EXPECT_LT(via_ring, kRows / 4) << "a 1 MiB ring holds a few of the epoch's 15 MB";
}

// A worker whose every stream carries one message the client cannot parse
// (a column both sent and in shared memory), then stays open: a worker as
// broken as can be that still answers.
class UnparsableWorker final : public ::sluice::Worker::Service {
 public:
  grpc::Status StreamBatches(grpc::ServerContext* context, const StreamBatchesRequest*,
                             grpc::ServerWriter<BatchMessage>* writer) override {
    BatchMessage message;
    message.set_rows(1);
    TensorData* column = message.add_columns();
    column->set_data("abc");
    column->set_shm_position(0);
    writer->Write(message);
    while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return grpc::Status::OK;
  }
};

// The client used to wait forever for such a stream's status (gRPC's Read
// fails as at a stream's end, but the call goes on), and so did the epoch.
// Now it cancels the stream; the real worker runs every split.
TEST_F(ServiceTest, AStreamWhoseMessageCannotBeParsedEndsInsteadOfHoldingTheEpoch) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  UnparsableWorker fake;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&fake);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto dispatcher =
      ::sluice::Dispatcher::NewStub(grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials()));
  WorkerHeartbeatRequest join;
  join.set_address(absl::StrCat("127.0.0.1:", port));
  for (const ops::OpSchema* op : ops::OpRegistry::Global().List()) join.add_ops(op->name());
  WorkerHeartbeatResponse joined;
  {  // listed before the client asks
    grpc::ClientContext context;
    ASSERT_TRUE(dispatcher->WorkerHeartbeat(&context, join, &joined).ok());
    join.set_worker_id(joined.worker_id());
    join.set_secret(joined.secret());
  }
  std::atomic<bool> done{false};
  std::thread beats([&] {  // keeps the fake listed while the epoch runs
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      grpc::ClientContext context;
      dispatcher->WorkerHeartbeat(&context, join, &joined);
    }
  });
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Distributed(cluster.address())));
  absl::StatusOr<Received> r = ReadEpoch(*pipeline);
  done = true;
  beats.join();
  server->Shutdown();
  SLUICE_ASSERT_OK(r.status());
  ExpectEachIdTimes(*r, 1);
}

// The client normalizes the uint8 images as their bytes arrive (the op
// folded into the distribute node): the floats equal an in-process run's,
// with and without compression.
TEST_F(ServiceTest, AnElementwiseOpAfterTheDistributeNodeRunsOnArrivalAndYieldsTheLocalValues) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  const OpSpec normalize =
      Op("normalize", {{"mean", {0.485, 0.456, 0.406}}, {"std", {0.229, 0.224, 0.225}}, {"scale", 1 / 255.0}});
  ASSERT_OK_AND_ASSIGN(auto local, exec::Pipeline::Create(Samples().Batch(64).Map({normalize}).Build()));
  std::map<int64_t, std::vector<float>> expected;
  auto read = [](const exec::Pipeline& p, std::map<int64_t, std::vector<float>>* out) -> absl::Status {
    auto it = p.Iterate(0);
    while (true) {
      Batch b;
      bool end = false;
      SLUICE_RETURN_IF_ERROR(it->Next(&b, &end));
      if (end) return absl::OkStatus();
      for (int64_t r = 0; r < b.rows; ++r) {
        const float* image = b.columns[1].values.data<float>() + r * kPixels;
        (*out)[b.columns[0].values.data<int64_t>()[r]].assign(image, image + kPixels);
      }
    }
  };
  SLUICE_ASSERT_OK(read(*local, &expected));
  ASSERT_EQ(expected.size(), static_cast<size_t>(kRows));
  for (const char* codec : {"", "lz4"}) {
    SCOPED_TRACE(codec);
    DistributeOptions d;
    d.dispatcher = cluster.address();
    d.compression = codec;
    d.connect_timeout_s = 5;
    ASSERT_OK_AND_ASSIGN(auto distributed, CreatePipeline(Samples().Distribute(d).Batch(64).Map({normalize}).Build()));
    ASSERT_EQ(distributed->compiled().nodes[0].ops.size(), 1u) << "normalize should run as batches arrive";
    std::map<int64_t, std::vector<float>> got;
    SLUICE_ASSERT_OK(read(*distributed, &got));
    EXPECT_TRUE(got == expected);
  }
}

TEST_F(ServiceTest, MoreClientsThanWorkersShareANamedJobAndALeavingClientOrLoopStallsNoOne) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  std::vector<std::unique_ptr<exec::Pipeline>> clients;
  for (int c = 0; c < 3; ++c) {
    ASSERT_OK_AND_ASSIGN(auto p, CreatePipeline(Distributed(cluster.address(), "distributed_epoch", "shared")));
    clients.push_back(std::move(p));
  }
  std::vector<absl::StatusOr<Received>> got(3, absl::UnknownError("not run"));
  {
    std::vector<std::thread> threads;
    for (int c = 0; c < 3; ++c) threads.emplace_back([&, c] { got[c] = ReadEpoch(*clients[c]); });
    for (auto& t : threads) t.join();
  }
  std::map<int64_t, int> all;
  for (const auto& g : got) {
    SLUICE_ASSERT_OK(g.status());
    for (const auto& [id, n] : g->count) all[id] += n;
  }
  ASSERT_EQ(all.size(), static_cast<size_t>(kRows));
  for (const auto& [id, n] : all) ASSERT_EQ(n, 1) << "id " << id;

  // Five batches of `epoch`, the iterator then dropped.
  auto read_a_little = [](exec::Pipeline& p, uint64_t epoch, Received* got) {
    auto it = p.Iterate(epoch);
    for (int b = 0; b < 5; ++b) {
      Batch batch;
      bool end = false;
      SLUICE_ASSERT_OK(it->Next(&batch, &end));
      for (int64_t r = 0; r < batch.rows; ++r) ++got->count[batch.columns[0].values.data<int64_t>()[r]];
    }
  };
  // Epoch 1: one client reads a little and leaves; the others still finish,
  // and between them and what the leaver took, nothing is missing.
  Received leaver;
  read_a_little(*clients[0], 1, &leaver);
  clients[0].reset();
  std::vector<absl::StatusOr<Received>> rest(2, absl::UnknownError("not run"));
  {
    std::vector<std::thread> threads;
    for (int c = 1; c < 3; ++c) threads.emplace_back([&, c] { rest[c - 1] = ReadEpoch(*clients[c], 1); });
    for (auto& t : threads) t.join();
  }
  std::map<int64_t, int> seen = leaver.count;
  for (const auto& g : rest) {
    SLUICE_ASSERT_OK(g.status());
    for (const auto& [id, n] : g->count) seen[id] += n;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kRows));

  // Epoch 2: one leaves the loop early but its pipeline lives on (its
  // client still beats): the other gets what it held at once, not when
  // that pipeline goes (before, it waited for it forever).
  Received early;
  read_a_little(*clients[1], 2, &early);
  ASSERT_OK_AND_ASSIGN(Received last, ReadEpoch(*clients[2], 2));
  std::map<int64_t, int> both = early.count;
  for (const auto& [id, n] : last.count) both[id] += n;
  EXPECT_EQ(both.size(), static_cast<size_t>(kRows));
}

TEST_F(ServiceTest, AWrongTokenIsRejected) {
  const std::string token = dir_.Join("token");
  std::ofstream(token) << "s3cret\n";
  TestCluster cluster({"--token-file", token});
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  PipelineDef def = Distributed(cluster.address());
  EXPECT_THAT(CreatePipeline(def), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("missing or wrong token")));
  const std::string wrong = dir_.Join("wrong");
  std::ofstream(wrong) << "guess\n";
  def.mutable_nodes(2)->mutable_distribute()->set_token_file(wrong);
  EXPECT_THAT(CreatePipeline(def), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("token")));
  def.mutable_nodes(2)->mutable_distribute()->set_token_file(token);
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(def));
  ASSERT_OK_AND_ASSIGN(Received r, ReadEpoch(*pipeline));
  ExpectEachIdTimes(r, 1);
}

// A CA, and a certificate it signs for 127.0.0.1, made with openssl.
void MakeCertificates(const testing::TempDir& dir) {
  const std::string d = dir.path();
  const std::string script =
      "cd " + d +
      " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
      "-subj /CN=sluice-test-ca 2>/dev/null && "
      "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 "
      "2>/dev/null && printf 'subjectAltName=IP:127.0.0.1' > san.ext && "
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
      "-days 2 -extfile san.ext 2>/dev/null";
  ASSERT_EQ(std::system(script.c_str()), 0) << "openssl failed";
}

// Per-role tokens: workers and the dispatcher hold a worker's, consumers a
// tenant's; a role calls only what it needs, a tenant sees only its jobs.
TEST_F(ServiceTest, CallersHaveRolesAndTenantsSeeOnlyTheirOwnJobs) {
  const std::string callers = dir_.Join("callers");
  std::ofstream(callers) << "# role name token\nworker fleet w-secret\nclient alice a-secret\n"
                            "client bob b-secret\nadmin root r-secret\n";
  auto token = [&](const std::string& name, const std::string& value) {
    std::ofstream(dir_.Join(name)) << value << "\n";
    return dir_.Join(name);
  };
  TestCluster cluster({"--callers", callers, "--token-file", token("worker.token", "w-secret")});
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  PipelineDef def = Distributed(cluster.address(), "distributed_epoch", "train");
  def.mutable_nodes(2)->mutable_distribute()->set_token_file(token("worker.token", "w-secret"));
  EXPECT_THAT(CreatePipeline(def),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("worker 'fleet' may not call RegisterPipeline")));
  def.mutable_nodes(2)->mutable_distribute()->set_token_file(token("alice.token", "a-secret"));
  ASSERT_OK_AND_ASSIGN(auto alice, CreatePipeline(def));
  auto it = alice->Iterate(0);  // alice's job is alive while she reads
  Batch batch;
  bool end = false;
  SLUICE_ASSERT_OK(it->Next(&batch, &end));

  auto status = [&](const std::string& who) {
    service::SecurityOptions security;
    EXPECT_TRUE(security.ReadTokenFile(dir_.Join(who + ".token")).ok());
    return service::FetchDispatcherStatus(cluster.address(), security);
  };
  token("bob.token", "b-secret");
  token("root.token", "r-secret");
  ASSERT_OK_AND_ASSIGN(DispatcherStatus seen_by_bob, status("bob"));
  EXPECT_EQ(seen_by_bob.jobs_size(), 0) << "alice's job is not bob's to see";
  ASSERT_OK_AND_ASSIGN(DispatcherStatus seen_by_root, status("root"));
  ASSERT_EQ(seen_by_root.jobs_size(), 1);
  EXPECT_EQ(seen_by_root.jobs(0).job_name(), "train");
  it.reset();

  // bob's "train" is his own job: he gets every sample, once.
  def.mutable_nodes(2)->mutable_distribute()->set_token_file(dir_.Join("bob.token"));
  ASSERT_OK_AND_ASSIGN(auto bob, CreatePipeline(def));
  ASSERT_OK_AND_ASSIGN(Received r, ReadEpoch(*bob));
  ExpectEachIdTimes(r, 1);
}

TEST_F(ServiceTest, MutualTlsServesCertifiedClientsAndRejectsOthers) {
  MakeCertificates(dir_);
  TestCluster cluster({"--tls-cert", dir_.Join("server.pem"), "--tls-key", dir_.Join("server.key"), "--tls-ca",
                       dir_.Join("ca.pem"), "--tls-require-client-cert"});
  SLUICE_ASSERT_OK(StartCluster(cluster, 1));
  PipelineDef def = Distributed(cluster.address());
  DistributeDef* d = def.mutable_nodes(2)->mutable_distribute();
  d->set_connect_timeout_s(2);
  EXPECT_FALSE(CreatePipeline(def).ok());  // plaintext to a TLS server
  d->set_tls_ca_file(dir_.Join("ca.pem"));
  EXPECT_FALSE(CreatePipeline(def).ok());  // TLS, but no client certificate
  d->set_tls_cert_file(dir_.Join("server.pem"));
  d->set_tls_key_file(dir_.Join("server.key"));
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(def));
  ASSERT_OK_AND_ASSIGN(Received r, ReadEpoch(*pipeline));
  ExpectEachIdTimes(r, 1);
}

TEST(DistributedPipeline, InvalidDistributeOptionsNameTheNodeAndField) {
  DistributeOptions d;
  d.dispatcher = "127.0.0.1:1";
  d.mode = "sometimes";
  EXPECT_THAT(CreatePipeline(Samples().Distribute(d).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'distribute' (nodes[2]): mode must be \"distributed_epoch\" or")));
  d.mode = "";
  d.compression = "gzip";
  EXPECT_THAT(CreatePipeline(Samples().Distribute(d).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("compression must be")));
  d.compression = "";
  EXPECT_THAT(CreatePipeline(Samples().Repeat(2).Distribute(d).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nodes[2]: in distributed_epoch mode repeat and take go after")));
  // A batch dropping its remainder per split would silently lose rows.
  EXPECT_THAT(CreatePipeline(Samples().Batch(16, /*drop_remainder=*/true).Distribute(d).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nodes[2] (batch): in distributed_epoch mode a batch before the distribute node "
                                 "is cut from each split on its own, so drop_remainder would drop every split's")));
}

TEST(DispatcherImpl, RefusesPipelinesWithOpsThatAreNotRegistered) {
  DispatcherOptions options;
  options.timeouts.worker_timeout = absl::Milliseconds(50);  // how long it waits for a worker that has them
  ASSERT_OK_AND_ASSIGN(auto dispatcher, DispatcherImpl::Create(options));
  RegisterPipelineRequest request;
  *request.mutable_pipeline() = Samples().Map({Op("system", {{"command", "rm -rf /"}})}).Build();
  EXPECT_THAT(dispatcher->RegisterPipeline(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pipeline rejected")));
  EXPECT_THAT(dispatcher->RegisterPipeline(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'system' is not registered on the dispatcher and no live worker has it")));
}

// A pipeline that would make the service allocate more than its caps is
// refused at registration, before any kernel or buffer exists.
TEST(DispatcherImpl, RefusesPipelinesOverItsResourceLimits) {
  DispatcherOptions options;
  options.limits.max_batch_bytes = 1 << 20;
  options.limits.max_buffer_bytes = 4 << 20;
  options.limits.max_threads = 8;
  ASSERT_OK_AND_ASSIGN(auto dispatcher, DispatcherImpl::Create(options));
  RegisterPipelineRequest request;
  *request.mutable_pipeline() = Samples().Batch(100000).Build();
  EXPECT_THAT(dispatcher->RegisterPipeline(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(batch): a batch of 77600000 bytes is over the limit max_batch_bytes (1048576)")));
  *request.mutable_pipeline() = Samples().Batch(1000).Prefetch(100).Build();
  EXPECT_THAT(dispatcher->RegisterPipeline(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(prefetch): a buffer of 100 elements of 776000 bytes is over the limit "
                                 "max_buffer_bytes (4194304)")));
  *request.mutable_pipeline() = Samples().Batch(1000).Threads(64).Build();
  EXPECT_THAT(dispatcher->RegisterPipeline(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("options.threads of 64 is over the limit max_threads (8)")));
  *request.mutable_pipeline() = Samples().Batch(1000).Prefetch(5).Threads(8).Build();
  SLUICE_EXPECT_OK(dispatcher->RegisterPipeline(request).status());
}

// The client refuses a pipeline past the dispatcher's limit before sending
// it, naming what makes it large; one sent all the same (another client)
// is refused by the dispatcher with the sizes.
TEST_F(ServiceTest, AnOversizedRequestIsRefusedWithTheSizes) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  const std::vector<uint8_t> big(70 << 20, 1);
  DistributeOptions d;
  d.dispatcher = cluster.address();
  d.connect_timeout_s = 5;
  const PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("x", {1 << 20}, big)}).Distribute(d).Build();
  EXPECT_THAT(CreatePipeline(def),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the pipeline to register is 71 MiB, past the 64 MiB a dispatcher takes; nodes[0] "
                                 "is 71 MiB of it (a source of arrays in memory")));
  auto dispatcher =
      ::sluice::Dispatcher::NewStub(grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials()));
  RegisterPipelineRequest request;
  *request.mutable_pipeline() = def;
  RegisterPipelineResponse response;
  grpc::ClientContext context;
  EXPECT_THAT(service::FromGrpc(dispatcher->RegisterPipeline(&context, request, &response), "register"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("larger than max")));
}

// A server dies with the process that started it, not with the thread:
// an embedded cluster made on a short-lived thread keeps its workers.
TEST(ServerProcess, OutlivesTheThreadThatStartedIt) {
  std::unique_ptr<testing::ServiceProcess> dispatcher;
  std::thread([&] {
    absl::StatusOr<std::unique_ptr<testing::ServiceProcess>> started =
        testing::ServiceProcess::Start(std::getenv("SLUICE_BIN"), {"dispatcher", "--host", "127.0.0.1", "--port", "0"});
    SLUICE_ASSERT_OK(started.status());
    dispatcher = *std::move(started);
  }).join();
  ASSERT_NE(dispatcher, nullptr);
  EXPECT_TRUE(service::FetchDispatcherStatus("127.0.0.1:" + std::to_string(dispatcher->port()), {}).ok())
      << "the dispatcher died with the thread";
  EXPECT_EQ(::waitpid(dispatcher->pid(), nullptr, WNOHANG), 0) << "still running";
}

TEST_F(ServiceTest, StatusShowsWorkersAndJobsAndSigtermStopsCleanly) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(StartCluster(cluster, 2));
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Distributed(cluster.address(), "distributed_epoch", "train")));
  ASSERT_OK_AND_ASSIGN(Received r, ReadEpoch(*pipeline));
  const std::string command =
      std::string(std::getenv("SLUICE_BIN")) + " status --dispatcher " + cluster.address() + " --json";
  std::FILE* p = ::popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0);
  DispatcherStatus status;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out, &status).ok()) << out;
  EXPECT_EQ(status.workers_size(), 2);
  ASSERT_EQ(status.jobs_size(), 1);
  EXPECT_EQ(status.jobs(0).job_name(), "train");
  EXPECT_EQ(status.jobs(0).splits_completed(), kRows / 100);
  for (int w = 0; w < 2; ++w) {
    const int wait_status = cluster.worker(w).Stop(SIGTERM);
    EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << "worker " << w;
  }
  const int wait_status = cluster.dispatcher().Stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
}

TEST_F(ServiceTest, TheEmbeddedDefaultStartsItsOwnDispatcherAndWorkers) {
  ASSERT_EQ(::setenv("SLUICE_BINARY", std::getenv("SLUICE_BIN"), 1), 0);
  DistributeOptions d;
  d.local_workers = 2;
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(Samples().Distribute(d).Batch(64).Build()));
  ASSERT_OK_AND_ASSIGN(Received r, ReadEpoch(*pipeline));
  ExpectEachIdTimes(r, 1);
}

}  // namespace
}  // namespace sluice::service
