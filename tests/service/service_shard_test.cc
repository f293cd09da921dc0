// Sharded pipelines through a real service (`sluice dispatcher` and
// `sluice worker` processes on 127.0.0.1, batches through the shared-memory
// rings): the node pool of a data-parallel job, where one set of workers
// makes every rank's stream. Each rank gets the batches its in-process
// pipeline makes, byte for byte; a worker killed mid-stream is replaced by
// another that goes on where it stopped; a state saved in-process resumes
// through the pool on another number of shards, and the other way round.
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "sluice/service/distributed_pipeline.h"
#include "status_matchers.h"
#include "test_cluster.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::sluice::testing::StatusOf;
using ::sluice::testing::TestCluster;
using ::testing::HasSubstr;

constexpr int kRows = 5000;  // 50 splits of 100
constexpr int kGlobalBatch = 64;

// Ids and side x side x 3 images, shuffled, sharded, augmented after the
// shard.
PipelineBuilder Sharded(int shards, int index, int side = 8) {
  const size_t pixels_per_image = static_cast<size_t>(side) * side * 3;
  std::vector<int64_t> ids(kRows);
  std::vector<uint8_t> pixels(kRows * pixels_per_image);
  for (int i = 0; i < kRows; ++i) ids[i] = i;
  for (size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<uint8_t>((i * 7 + i / pixels_per_image) % 251);
  }
  PipelineBuilder b =
      PipelineBuilder::Arrays({MakeArrayColumn("id", {}, ids), MakeArrayColumn("image", {side, side, 3}, pixels)});
  b.SplitRecords(100).ShuffleSplits().Shuffle(300).Shard(shards, index).Map({Op("random_flip")});
  b.Batch(kGlobalBatch / shards).Seed(5);
  return b;
}

PipelineDef InProcess(int shards, int index, int side = 8) { return Sharded(shards, index, side).Build(); }

// `tcp`: no shared-memory ring, so that HTTP/2's flow control holds the
// worker a few MB ahead of the consumer.
PipelineDef ThroughPool(const std::string& dispatcher, int shards, int index, int side = 8, bool tcp = false) {
  DistributeOptions d;
  d.dispatcher = dispatcher;
  d.mode = "parallel_epochs";
  d.job_name = "rank-" + std::to_string(index);
  d.connect_timeout_s = 10;
  if (tcp) d.shared_memory_mb = -1;
  return Sharded(shards, index, side).Distribute(d).Build();
}

// Every column's bytes, batch by batch.
using Stream = std::vector<std::vector<uint8_t>>;

absl::Status ReadAll(exec::PipelineIterator* it, Stream* out, int stop_at = -1,
                     const std::function<void()>& at_10 = nullptr) {
  while (static_cast<int>(out->size()) != stop_at) {
    Batch b;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(it->Next(&b, &end));
    if (end) return absl::OkStatus();
    std::vector<uint8_t> bytes;
    for (const Column& c : b.columns) {
      const uint8_t* p = c.values.data<uint8_t>();
      bytes.insert(bytes.end(), p, p + c.values.byte_size());
    }
    out->push_back(std::move(bytes));
    if (out->size() == 10 && at_10) at_10();
  }
  return absl::OkStatus();
}

absl::StatusOr<Stream> InProcessStream(int shards, int index, int side = 8) {
  SLUICE_ASSIGN_OR_RETURN(auto pipeline, exec::Pipeline::Create(InProcess(shards, index, side)));
  Stream out;
  SLUICE_RETURN_IF_ERROR(ReadAll(pipeline->Iterate(0).get(), &out));
  return out;
}

TEST(ServiceShardTest, TwoRanksThroughOnePoolGetTheirInProcessBatches) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  SLUICE_ASSERT_OK(cluster.AddWorker(2));
  Stream got[2];
  absl::Status status[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<exec::Pipeline>> pipeline = CreatePipeline(ThroughPool(cluster.address(), 2, r));
      status[r] = pipeline.ok() ? ReadAll((*pipeline)->Iterate(0).get(), &got[r]) : pipeline.status();
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    SLUICE_ASSERT_OK(status[r]);
    ASSERT_OK_AND_ASSIGN(Stream want, InProcessStream(2, r));
    EXPECT_EQ(got[r].size(), static_cast<size_t>(kRows / kGlobalBatch)) << "rank " << r;
    EXPECT_TRUE(got[r] == want) << "rank " << r << ": the pool's batches are not the in-process shard's";
  }
}

TEST(ServiceShardTest, AWorkerKilledMidStreamIsReplacedWithoutLossOrRepeat) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  SLUICE_ASSERT_OK(cluster.AddWorker());
  constexpr int kSide = 48;  // 15 MB per shard: the worker is mid-stream when killed
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(ThroughPool(cluster.address(), 2, 1, kSide, /*tcp=*/true)));
  Stream got;
  absl::Status added;
  // The stream runs on the only worker; once 10 batches arrived a second
  // joins and the first is killed: the second goes on from the last state.
  ::testing::internal::CaptureStderr();
  const absl::Status read = ReadAll(pipeline->Iterate(0).get(), &got, -1, [&] {
    added = cluster.AddWorker();
    cluster.worker(0).Stop(SIGKILL);
  });
  const std::string log = ::testing::internal::GetCapturedStderr();
  SLUICE_ASSERT_OK(read);
  SLUICE_ASSERT_OK(added);
  EXPECT_THAT(log, HasSubstr("the shard's stream goes on from batch"));
  ASSERT_OK_AND_ASSIGN(Stream want, InProcessStream(2, 1, kSide));
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "batches lost, repeated or drawn otherwise after the worker died";
}

TEST(ServiceShardTest, StatesMoveBetweenInProcessAndThePoolOnAnotherNumberOfShards) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  SLUICE_ASSERT_OK(cluster.AddWorker(2));
  // Shard 0 of 2 in-process saves after 10 global batches; one shard
  // through the pool goes on with the 11th global batch.
  ASSERT_OK_AND_ASSIGN(auto local, exec::Pipeline::Create(InProcess(2, 0)));
  std::unique_ptr<exec::PipelineIterator> it = local->Iterate(0);
  Stream first;
  SLUICE_ASSERT_OK(ReadAll(it.get(), &first, 10));
  ASSERT_OK_AND_ASSIGN(std::string state, it->SaveState());
  ASSERT_OK_AND_ASSIGN(auto pooled, CreatePipeline(ThroughPool(cluster.address(), 1, 0)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::PipelineIterator> resumed, pooled->Resume(state));
  Stream rest;
  SLUICE_ASSERT_OK(ReadAll(resumed.get(), &rest, 5));
  ASSERT_OK_AND_ASSIGN(Stream one_shard, InProcessStream(1, 0));
  EXPECT_TRUE(Stream(one_shard.begin() + 10, one_shard.begin() + 15) == rest);

  // The pool's state after those (15 global batches) resumes shard 1 of 2
  // in-process at its 16th batch.
  ASSERT_OK_AND_ASSIGN(std::string pool_state, resumed->SaveState());
  ASSERT_OK_AND_ASSIGN(auto shard_1, exec::Pipeline::Create(InProcess(2, 1)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::PipelineIterator> back, shard_1->Resume(pool_state));
  Stream tail;
  SLUICE_ASSERT_OK(ReadAll(back.get(), &tail));
  ASSERT_OK_AND_ASSIGN(Stream shard_1_all, InProcessStream(2, 1));
  EXPECT_TRUE(Stream(shard_1_all.begin() + 15, shard_1_all.end()) == tail);
}

TEST(ServiceShardTest, BatchesLargerThanADefaultRingComeThroughARingSizedForThem) {
  TestCluster cluster;
  SLUICE_ASSERT_OK(cluster.StartDispatcher());
  SLUICE_ASSERT_OK(cluster.AddWorker(2));
  DistributeOptions d;
  d.dispatcher = cluster.address();
  d.mode = "parallel_epochs";
  // 64 images of 512x512x3: 50 MB a batch, which a 64 MB ring holds once.
  PipelineBuilder big = Sharded(1, 0);
  big.Map({Op("resize", {{"size", {512, 512}}})}).Distribute(d);
  ASSERT_OK_AND_ASSIGN(auto pipeline, CreatePipeline(big.Build()));
  std::unique_ptr<exec::PipelineIterator> it = pipeline->Iterate(0);
  Batch previous, next;  // a loop holds the last batch while it takes the next
  // Nine batches: the worker counts a batch once its write returns, which
  // may be after the client has it; the ninth is written after the eighth
  // is counted.
  for (int i = 0; i < 9; ++i) {
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&next, &end));
    ASSERT_FALSE(end);
    previous = std::move(next);
  }
  const WorkerStatus status = StatusOf(cluster.worker(0));
  EXPECT_GE(status.samples_sent(), 8 * kGlobalBatch);
  EXPECT_GE(status.samples_sent_shared_memory(), 8 * kGlobalBatch) << "batches fell back to TCP";
}

TEST(ServiceShardTest, AShardBeforeTheDistributeNodeNeedsParallelEpochsAndItsBatch) {
  DistributeOptions d;
  d.dispatcher = "127.0.0.1:1";
  d.mode = "distributed_epoch";
  EXPECT_THAT(CreatePipeline(Sharded(2, 0).Distribute(d).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs mode \"parallel_epochs\"")));
  d.mode = "parallel_epochs";
  PipelineBuilder unbatched = PipelineBuilder::Arrays({MakeArrayColumn("id", {}, std::vector<int64_t>(100, 1))});
  unbatched.Shard(2, 0).Distribute(d).Batch(4);
  EXPECT_THAT(CreatePipeline(unbatched.Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the batch goes before it too")));
}

}  // namespace
}  // namespace sluice::service
