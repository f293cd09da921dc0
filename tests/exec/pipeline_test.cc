// The engine end to end on small real files: determinism across thread
// counts, ordering, shuffling, batching, bounded memory and bad input.
#include "sluice/exec/pipeline.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include "example.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/idx_file.h"
#include "sluice/io/object_cache.h"
#include "sluice/io/tfrecord_index.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"
#include "test_ops.h"

namespace sluice::exec {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Every element of one epoch, copied out.
struct Output {
  std::vector<int64_t> rows;                // per element
  std::vector<std::vector<uint8_t>> bytes;  // per element, all columns
  std::vector<int64_t> labels;              // every label, in order
  std::vector<std::vector<uint8_t>> rows0;  // every row of the first column
};

Output Collect(PipelineIterator* it, const Schema& schema, absl::Status* status) {
  const std::optional<int> label = schema.Find("label");
  Output out;
  while (true) {
    Batch b;
    bool end = false;
    *status = it->Next(&b, &end);
    if (!status->ok() || end) break;
    out.rows.push_back(b.rows);
    std::vector<uint8_t> bytes;
    for (const Column& c : b.columns) {
      bytes.insert(bytes.end(), c.values.raw_data(), c.values.raw_data() + c.values.byte_size());
    }
    out.bytes.push_back(std::move(bytes));
    const Tensor& first = b.columns[0].values;
    const size_t row_bytes = first.byte_size() / b.rows;
    for (int64_t r = 0; r < b.rows; ++r) {
      out.rows0.emplace_back(first.raw_data() + r * row_bytes, first.raw_data() + (r + 1) * row_bytes);
    }
    if (label) {
      const int64_t* l = b.columns[*label].values.data<int64_t>();
      out.labels.insert(out.labels.end(), l, l + b.rows);
    }
  }
  return out;
}

// What an epoch skipped under on_corrupt "skip".
struct Skipped {
  int64_t records = 0;
  std::string summary;
};

absl::StatusOr<Output> RunEpoch(const PipelineDef& def, uint64_t epoch = 0, Skipped* skipped = nullptr) {
  auto pipeline = Pipeline::Create(def);
  if (!pipeline.ok()) return pipeline.status();
  auto it = (*pipeline)->Iterate(epoch);
  absl::Status status;
  Output out = Collect(it.get(), (*pipeline)->output_schema(), &status);
  if (!status.ok()) return status;
  if (skipped != nullptr) *skipped = {it->skipped().skipped(), it->skipped().Summary()};
  return out;
}

// Another pipeline's output as the remote input of a distribute node, as
// the service's client provides it.
class PipelineAsRemoteInput : public RemoteInput {
 public:
  explicit PipelineAsRemoteInput(std::unique_ptr<Pipeline> workers_part) : part_(std::move(workers_part)) {}
  std::unique_ptr<Iterator> Open(ExecContext*, const graph::CompiledNode&, uint64_t epoch) override {
    return std::make_unique<Adapter>(part_->Iterate(epoch));
  }
  int64_t Cardinality() const override { return part_->Cardinality(); }

 private:
  class Adapter : public Iterator {
   public:
    explicit Adapter(std::unique_ptr<PipelineIterator> it) : it_(std::move(it)) {}
    absl::Status GetNext(Batch* out, bool* end) override { return it_->Next(out, end); }

   private:
    std::unique_ptr<PipelineIterator> it_;
  };
  std::unique_ptr<Pipeline> part_;
};

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override { files_ = testing::WriteCifarTfRecords(dir_.path(), kRecords, 3); }

  // W2's shape: parse, dilation, random blur, batch, rescale, random warps.
  PipelineBuilder W2Like(int threads) {
    PipelineBuilder b =
        PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", 3072), Int64Feature("label")});
    b.Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("grey_dilation", {{"size", 3}}),
           Op("gaussian_blur", {{"ksize", 11}, {"sigma", {0.5, 1.5}}})})
        .Batch(16)
        .Map({Op("rescale", {{"scale", 1 / 255.0}}), Op("random_flip"), Op("random_rotation", {{"degrees", 20.0}}),
              Op("random_zoom", {{"scale", {0.9, 1.1}}})})
        .Prefetch(2)
        .Seed(1234)
        .Threads(threads);
    return b;
  }

  static constexpr int kRecords = 100;
  testing::TempDir dir_;
  std::vector<std::string> files_;
};

TEST_F(PipelineTest, OneSeedGivesBitIdenticalBatchesWhateverTheThreadCount) {
  ASSERT_OK_AND_ASSIGN(Output one, RunEpoch(W2Like(1).Build()));
  ASSERT_OK_AND_ASSIGN(Output two, RunEpoch(W2Like(2).Build()));
  ASSERT_OK_AND_ASSIGN(Output four, RunEpoch(W2Like(4).Build()));
  ASSERT_EQ(one.rows, (std::vector<int64_t>{16, 16, 16, 16, 16, 16, 4}));
  EXPECT_TRUE(one.bytes == two.bytes);
  EXPECT_TRUE(one.bytes == four.bytes);
  // A different seed or epoch changes the augmentation.
  ASSERT_OK_AND_ASSIGN(Output reseeded, RunEpoch(W2Like(2).Seed(99).Build()));
  ASSERT_OK_AND_ASSIGN(Output epoch1, RunEpoch(W2Like(2).Build(), 1));
  EXPECT_FALSE(one.bytes == reseeded.bytes);
  EXPECT_FALSE(one.bytes == epoch1.bytes);
}

TEST_F(PipelineTest, ABatchLevelOpSeesEachWholeBatchWhateverTheThreads) {
  ops::OpRegistry registry;
  SLUICE_ASSERT_OK(ops::RegisterBuiltinOps(&registry));
  SLUICE_ASSERT_OK(testing::RegisterTestOps(&registry));
  const PipelineDef def = PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")})
                              .Batch(64)
                              .Map({Op("batch_sum")})
                              .Threads(2)
                              .Build();
  ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline compiled, graph::Compile(def, registry));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> pipeline, Pipeline::FromCompiled(std::move(compiled)));
  std::unique_ptr<PipelineIterator> it = pipeline->Iterate();
  int batches = 0;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&b, &end));
    if (end) break;
    ++batches;
    const int64_t* label = b.columns[0].values.data<int64_t>();
    const int64_t* sum = b.columns[1].values.data<int64_t>();
    int64_t expected = 0;
    for (int64_t r = 0; r < b.rows; ++r) expected += label[r];
    for (int64_t r = 0; r < b.rows; ++r) ASSERT_EQ(sum[r], expected) << "batch " << batches << " row " << r;
  }
  EXPECT_EQ(batches, 2);  // 100 records: 64 + 36
}

TEST_F(PipelineTest, ParallelReadsGiveTheSameBatchesAsOneReader) {
  ASSERT_OK_AND_ASSIGN(Output one, RunEpoch(W2Like(2).Build()));
  for (int readers : {2, 3, 8}) {
    ASSERT_OK_AND_ASSIGN(Output parallel, RunEpoch(W2Like(2).ParallelReads(readers).Build()));
    EXPECT_EQ(parallel.rows, one.rows) << readers << " readers";
    EXPECT_TRUE(parallel.bytes == one.bytes) << readers << " readers";
  }
  // Splits shuffled per epoch: the same order as one reader's too.
  ASSERT_OK_AND_ASSIGN(Output shuffled, RunEpoch(W2Like(2).ShuffleSplits().Build(), 3));
  ASSERT_OK_AND_ASSIGN(Output shuffled_parallel, RunEpoch(W2Like(2).ShuffleSplits().ParallelReads(3).Build(), 3));
  EXPECT_EQ(shuffled_parallel.labels, shuffled.labels);
}

TEST_F(PipelineTest, ParallelReadsCutChunksAcrossSplitsAsOneReaderDoes) {
  // Files of 34, 33 and 33 records, batches of 16: one reader cuts the
  // source's chunks as the batches are, 6 of 16 and the last of 4.
  // Parallel reads once cut one at each file's end as well (16, 16, 2, ...:
  // 9 chunks), so the batch node had to copy those batches together.
  for (int readers : {1, 2, 3}) {
    const PipelineDef def = PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")})
                                .Batch(16)
                                .ParallelReads(readers)
                                .Build();
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> pipeline, Pipeline::Create(def));
    std::unique_ptr<PipelineIterator> it = pipeline->Iterate();
    absl::Status status;
    const Output out = Collect(it.get(), pipeline->output_schema(), &status);
    SLUICE_ASSERT_OK(status);
    EXPECT_EQ(out.rows, (std::vector<int64_t>{16, 16, 16, 16, 16, 16, 4})) << readers << " readers";
    ASSERT_NE(it->stats(), nullptr);
    const NodeStatsSnapshot source = it->stats()->Snapshot().nodes[0];
    EXPECT_EQ(source.elements, 7) << readers << " readers";
    EXPECT_EQ(source.rows, kRecords) << readers << " readers";
  }
}

TEST_F(PipelineTest, AParallelReadersErrorComesAtItsSplitsTurn) {
  // The second of three files is cut inside its last record.
  std::sort(files_.begin(), files_.end());
  std::filesystem::resize_file(files_[1], std::filesystem::file_size(files_[1]) - 10);
  const PipelineDef def =
      PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")}).ParallelReads(3).Build();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> pipeline, Pipeline::Create(def));
  std::unique_ptr<PipelineIterator> it = pipeline->Iterate();
  int64_t rows = 0;
  absl::Status status;
  while (status.ok()) {
    Batch b;
    bool end = false;
    status = it->Next(&b, &end);
    if (end) break;
    rows += b.rows;
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss, HasSubstr(files_[1])));
  EXPECT_EQ(rows, 34) << "the first file's rows came first, none of the third's";
}

TEST_F(PipelineTest, AnObjectCacheIsSetUpWhenThePipelineIsMadeOrRefusedNamingItsFolder) {
  const std::string cache = dir_.Join("object-cache");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> pipeline,
                       Pipeline::Create(W2Like(2).CacheObjects(cache, 1 << 20).Build()));
  ASSERT_NE(io::ObjectCache::Get(), nullptr);
  EXPECT_EQ(io::ObjectCache::Get()->dir(), cache);
  EXPECT_TRUE(std::filesystem::is_directory(cache));
  EXPECT_THAT(Pipeline::Create(W2Like(2).CacheObjects(files_[0] + "/cache", 1 << 20).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(files_[0] + "/cache")));
  EXPECT_THAT(Pipeline::Create(W2Like(2).CacheObjects(cache, 0).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_bytes must be > 0")));
}

TEST_F(PipelineTest, AParallelReadersPipelineStopsMidEpoch) {
  const PipelineDef def = W2Like(2).ParallelReads(3).Build();
  for (int round = 0; round < 20; ++round) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> pipeline, Pipeline::Create(def));
    std::unique_ptr<PipelineIterator> it = pipeline->Iterate();
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&b, &end));
  }  // destroyed with readers still reading: no hang, no crash
}

// A service worker sends what NextRows hands it as one message: an
// unbatched pipeline's chunks whole, not a sample at a time, every row once.
TEST_F(PipelineTest, NextRowsHandsOutAnUnbatchedPipelinesChunksUpToASizeAndSavesNoPosition) {
  constexpr int kTotal = 1000;
  std::vector<int64_t> ids(kTotal);
  for (int i = 0; i < kTotal; ++i) ids[i] = i;
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(PipelineBuilder::Arrays({MakeArrayColumn("id", {}, ids)})
                                                           .Map({Op("cast", {{"field", "id"}, {"dtype", "float32"}})})
                                                           .Build()));
  auto it = pipeline->Iterate(0);
  std::vector<int64_t> sizes;
  std::vector<float> seen;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->NextRows(&b, &end, size_t{1} << 20));
    if (end) break;
    sizes.push_back(b.rows);
    const float* v = b.columns[0].values.data<float>();
    seen.insert(seen.end(), v, v + b.rows);
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kTotal));
  for (int i = 0; i < kTotal; ++i) ASSERT_EQ(seen[i], static_cast<float>(i)) << "row " << i;
  EXPECT_GT(sizes.size(), 1u);
  EXPECT_EQ(*std::min_element(sizes.begin(), sizes.end() - 1), 128) << "a chunk's rows, not one sample";
  EXPECT_THAT(it->SaveState().status(), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("NextRows")));

  // At most `max_bytes` of rows (4 bytes each): a chunk of big rows is
  // cut, every row still once.
  it = pipeline->Iterate(1);
  int64_t rows = 0, short_ones = 0;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->NextRows(&b, &end, 40));
    if (end) break;
    ASSERT_LE(b.rows, 10);
    short_ones += b.rows < 10;  // a chunk's last rows
    ASSERT_EQ(b.columns[0].values.data<float>()[0], static_cast<float>(rows));
    rows += b.rows;
  }
  EXPECT_EQ(rows, kTotal);
  EXPECT_LE(short_ones, (kTotal + 127) / 128);
}

TEST_F(PipelineTest, OrderedByDefaultAndUnorderedOnRequest) {
  ASSERT_OK_AND_ASSIGN(Output w2, RunEpoch(W2Like(2).Build()));
  std::vector<int64_t> expected;
  for (int i = 0; i < kRecords; ++i) expected.push_back(i % 10);
  EXPECT_EQ(w2.labels, expected);

  // Unordered: the same samples in any order, random draws included (they
  // key on each sample's identity, not its position).
  PipelineDef def = W2Like(2).Build();
  ASSERT_OK_AND_ASSIGN(Output ordered, RunEpoch(def));
  def.mutable_options()->set_unordered(true);
  ASSERT_OK_AND_ASSIGN(Output unordered, RunEpoch(def));
  std::multiset<std::vector<uint8_t>> a(ordered.rows0.begin(), ordered.rows0.end());
  std::multiset<std::vector<uint8_t>> b(unordered.rows0.begin(), unordered.rows0.end());
  EXPECT_EQ(ordered.rows0.size(), static_cast<size_t>(kRecords));
  EXPECT_TRUE(a == b);
}

TEST_F(PipelineTest, ShuffleIsAPermutationReshuffledEachEpoch) {
  PipelineDef def = PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")})
                        .Map({Op("cast", {{"field", "label"}, {"dtype", "int64"}})})
                        .Shuffle(64)
                        .Batch(10)
                        .Seed(7)
                        .Build();
  ASSERT_OK_AND_ASSIGN(Output e0, RunEpoch(def, 0));
  ASSERT_OK_AND_ASSIGN(Output e0_again, RunEpoch(def, 0));
  ASSERT_OK_AND_ASSIGN(Output e1, RunEpoch(def, 1));
  EXPECT_EQ(e0.labels, e0_again.labels);
  EXPECT_NE(e0.labels, e1.labels);
  std::map<int64_t, int> counts;
  for (int64_t l : e0.labels) ++counts[l];
  ASSERT_EQ(counts.size(), 10u);
  for (const auto& [label, n] : counts) EXPECT_EQ(n, 10) << label;
  std::vector<int64_t> in_order;
  for (int i = 0; i < kRecords; ++i) in_order.push_back(i % 10);
  EXPECT_NE(e0.labels, in_order);
}

TEST_F(PipelineTest, BatchRemainderTakeRepeatAndFilter) {
  auto labels_of = [&](PipelineBuilder b) {
    auto out = RunEpoch(b.Build());
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : Output();
  };
  auto base = [&] { return PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")}); };
  EXPECT_EQ(labels_of(base().Batch(30, true)).rows, (std::vector<int64_t>{30, 30, 30}));
  EXPECT_EQ(labels_of(base().Batch(30)).rows, (std::vector<int64_t>{30, 30, 30, 10}));
  EXPECT_EQ(labels_of(base().Take(7)).labels.size(), 7u);  // samples before batching
  EXPECT_EQ(labels_of(base().Batch(30).Take(2)).rows, (std::vector<int64_t>{30, 30}));
  EXPECT_EQ(labels_of(base().Repeat(3).Batch(64)).labels.size(), 3u * kRecords);
  const Output kept = labels_of(base().Filter(Op("keep_if", {{"cmp", "<"}, {"value", 3.0}})).Batch(8));
  EXPECT_EQ(kept.labels.size(), 30u);
  for (int64_t l : kept.labels) EXPECT_LT(l, 3);
}

TEST_F(PipelineTest, UnbatchedPipelinesYieldSamples) {
  ASSERT_OK_AND_ASSIGN(Output out,
                       RunEpoch(PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")}).Build()));
  EXPECT_EQ(out.rows.size(), static_cast<size_t>(kRecords));
  EXPECT_EQ(out.rows[0], 1);
}

TEST_F(PipelineTest, MemoryBudgetBoundsWhatTheEngineHoldsAndWhatTheConsumerKeeps) {
  // One chunk of the first map's outputs (16 x 3072 uint8) and of the
  // second's (16 x 3072 float32) is the least the pipeline can run in.
  const int64_t least = 16 * 3072 + 16 * 3072 * 4;
  const int64_t budget = least + (150 << 10);
  PipelineDef def = W2Like(2).Prefetch(8).Build();
  def.mutable_options()->set_memory_budget_bytes(budget);
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(def));
  auto it = pipeline->Iterate(0);
  // The consumer keeps each batch until it has the next, as a training
  // loop's `for batch in loader` does.
  Batch held, next;
  bool end = false;
  int n = 0;
  while (it->Next(&next, &end).ok() && !end) {
    held = std::move(next);
    ++n;
  }
  EXPECT_EQ(n, 7);
  // Unbounded, eight prefetched float batches alone would take 1.5 MB. A
  // node makes an element past the budget only while the consumer waits on
  // it, and this one gives each batch back before it asks for the one after
  // next: over the budget by at most the input each map is working on, in
  // 64 KiB blocks: the first map's output and the source's records it is
  // made from, two of each where a batch spans two files.
  const BufferPool::Stats memory = pipeline->memory();
  EXPECT_LE(static_cast<int64_t>(memory.peak_held_bytes), budget + (64 << 10) * 4);
  EXPECT_GE(memory.peak_held_bytes, memory.peak_live_bytes);
}

TEST_F(PipelineTest, AConsumerThatKeepsEveryBatchGetsThemAllPastTheBudget) {
  // The budget holds two float batches; the consumer keeps seven. The nodes
  // it waits on go past the budget rather than wait for memory it will
  // never give back.
  PipelineDef def = W2Like(2).Build();
  def.mutable_options()->set_memory_budget_bytes((64 << 10) + 2 * (192 << 10) + (64 << 10));
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(def));
  auto it = pipeline->Iterate(0);
  std::vector<Batch> kept;
  Batch next;
  bool end = false;
  while (it->Next(&next, &end).ok() && !end) kept.push_back(std::move(next));
  EXPECT_EQ(kept.size(), 7u);
  EXPECT_GE(static_cast<int64_t>(pipeline->memory().live_bytes), int64_t{kRecords} * 3072 * 4);  // all, as floats
}

TEST_F(PipelineTest, BatchesThatSpanTwoFilesHoldTheRowsOfBoth) {
  // Three files of about 33 records in batches of 16: a file's last chunk is
  // short, and its batch takes the rest of its rows from the next file. The
  // map gives a short chunk blocks with room for 16 rows, and the rest is
  // copied in after its rows (BatchBuilder's in-place path): the batches
  // hold the same bytes as the rows of the pipeline without the batch.
  auto build = [&](bool batched) {
    PipelineBuilder b = PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", 3072)});
    b.Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("grey_dilation", {{"size", 3}})}).Threads(1);
    if (batched) b.Batch(16);
    return b.Build();
  };
  ASSERT_OK_AND_ASSIGN(auto rows_pipeline, Pipeline::Create(build(false)));
  std::string rows;
  auto rows_it = rows_pipeline->Iterate(0);
  Batch row;
  bool end = false;
  while (rows_it->Next(&row, &end).ok() && !end) {
    rows.append(reinterpret_cast<const char*>(row.columns[0].values.raw_data()), row.columns[0].values.byte_size());
  }
  ASSERT_OK_AND_ASSIGN(auto batched_pipeline, Pipeline::Create(build(true)));
  std::string batches;
  auto it = batched_pipeline->Iterate(0);
  Batch batch;
  end = false;
  int spanning = 0;
  while (it->Next(&batch, &end).ok() && !end) {
    if (batch.provenance.File(0) != batch.provenance.File(batch.rows - 1)) ++spanning;
    batches.append(reinterpret_cast<const char*>(batch.columns[0].values.raw_data()),
                   batch.columns[0].values.byte_size());
  }
  EXPECT_GT(spanning, 0);
  EXPECT_EQ(batches.size(), size_t{kRecords} * 3072);
  EXPECT_TRUE(batches == rows) << "the batches' bytes differ from the rows'";
}

TEST_F(PipelineTest, MemoryBudgetTooSmallForOneChunkOfEachMapNamesTheMinimumAndTheNodes) {
  PipelineDef def = W2Like(2).Build();
  def.mutable_options()->set_memory_budget_bytes(100 << 10);
  // Each map's outputs: 16 images, uint8 then float32 (and the first's
  // label), each in a block of the pool (64 KiB, 192 KiB and 256 bytes).
  EXPECT_THAT(Pipeline::Create(def).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("memory_budget_bytes 102400 is less than the "), HasSubstr("16 rows"),
                             HasSubstr("node 'map_1' 65792 (ops "), HasSubstr("node 'map_3' 196608 (ops "))));
}

TEST_F(PipelineTest, DefaultMemoryBudgetIsSizedToTheMachineAndTheRanksOnIt) {
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(W2Like(1).Build()));
  const graph::CompiledPipeline& c = pipeline->compiled();
  EXPECT_GE(c.memory_budget_bytes, int64_t{256} << 20);
  EXPECT_LE(c.memory_budget_bytes, int64_t{2048} << 20);
  EXPECT_THAT(c.memory_budget_default, HasSubstr("for 1 rank"));
  // Four ranks on the node (torchrun's LOCAL_WORLD_SIZE) share it.
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  absl::StatusOr<std::unique_ptr<Pipeline>> shared = Pipeline::Create(W2Like(1).Build());
  unsetenv("LOCAL_WORLD_SIZE");
  SLUICE_ASSERT_OK(shared.status());
  EXPECT_THAT((*shared)->compiled().memory_budget_default, HasSubstr("for 4 ranks"));
  const int64_t quarter = (*shared)->compiled().memory_budget_bytes;
  if (c.memory_budget_bytes / 4 < (int64_t{256} << 20)) {  // the share is under the least: said so
    EXPECT_THAT((*shared)->compiled().memory_budget_default, HasSubstr("raised to the least)"));
  }
  EXPECT_LE(quarter, c.memory_budget_bytes);
  if (c.memory_budget_bytes < (int64_t{2048} << 20)) {  // not at the ceiling: a share of the machine
    EXPECT_EQ(quarter, std::max(int64_t{256} << 20, c.memory_budget_bytes / 4));
  }
}

TEST_F(PipelineTest, ADefaultBudgetMakesRoomForABatchWhileTheConsumerHoldsOne) {
  // Batches of 100,000 CIFAR-sized images: 307 MB of uint8 from the first
  // map, 1.2 GB of float32 from the second, past the default's 2 GiB cap.
  // Creating the pipeline allocates none of it.
  constexpr int64_t kRows = 100000;
  PipelineDef def =
      PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", 3072), Int64Feature("label")})
          .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("grey_dilation", {{"size", 3}})})
          .Batch(kRows)
          .Map({Op("rescale", {{"scale", 1 / 255.0}})})
          .Build();
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(def));
  // The images' blocks of the pool; the labels add under 3 MB.
  const int64_t first = BufferPool::BlockBytes(kRows * 3072), second = BufferPool::BlockBytes(kRows * 3072 * 4);
  const graph::CompiledPipeline& c = pipeline->compiled();
  EXPECT_GE(c.memory_budget_bytes, first + 2 * second);
  EXPECT_LT(c.memory_budget_bytes, first + 2 * second + (int64_t{4} << 20));
  EXPECT_THAT(c.memory_budget_default,
              AllOf(HasSubstr("room to make a batch while the consumer holds one"), HasSubstr("for 1 rank")));
  // Set by the options, the same budget less a byte is refused.
  def.mutable_options()->set_memory_budget_bytes(first + second - 1);
  EXPECT_THAT(Pipeline::Create(def).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs to make progress")));
}

// A shuffle's buffer holds its rows whatever the budget: one larger than
// the budget is refused at creation, naming the node and its bytes.
TEST_F(PipelineTest, AShuffleBufferLargerThanTheBudgetIsRefusedNamingIt) {
  std::vector<uint8_t> pixels(size_t{4096} * 1024);
  PipelineBuilder rows = PipelineBuilder::Arrays({MakeArrayColumn("image", {1024}, pixels)});
  PipelineDef def = rows.Shuffle(2048).Batch(64).Build();
  def.mutable_options()->set_memory_budget_bytes(int64_t{1} << 20);
  EXPECT_THAT(Pipeline::Create(def).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'shuffle_1' 3145728 (a buffer of 2048 rows, in chunks "
                                 "of up to 3072 rows)")));
  def.mutable_options()->set_memory_budget_bytes(int64_t{4} << 20);
  SLUICE_EXPECT_OK(Pipeline::Create(def).status());
  // "Shuffle everything" holds the epoch's 4096 rows, not a billion.
  PipelineDef everything =
      PipelineBuilder::Arrays({MakeArrayColumn("image", {1024}, pixels)}).Shuffle(1000000000).Batch(64).Build();
  everything.mutable_options()->set_memory_budget_bytes(int64_t{8} << 20);
  SLUICE_EXPECT_OK(Pipeline::Create(everything).status());
}

TEST_F(PipelineTest, AShuffleBufferHoldsAboutItsRowsNotTheChunksTheyCameIn) {
  // Rows of 3 KiB (float32 16 x 16 x 3) in chunks of 64; a buffer of 2048
  // rows keeps rows alive for ~2048 draws each, so a chunk lives until its
  // last row is drawn: ~5x the buffer's rows without compaction.
  constexpr int kTotal = 20000, kBuffer = 2048, kBatch = 64;
  const int64_t row_bytes = 16 * 16 * 3 * 4;
  std::vector<uint8_t> pixels(static_cast<size_t>(kTotal) * 16 * 16 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i % 251);
  PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("image", {16, 16, 3}, pixels)})
                        .Map({Op("rescale", {{"scale", 1 / 255.0}})}, 1)
                        .Shuffle(kBuffer)
                        .Batch(kBatch)
                        .Threads(1)
                        .Build();
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(def));
  auto it = pipeline->Iterate(0);
  Batch b;
  bool end = false;
  int64_t rows = 0;
  while (it->Next(&b, &end).ok() && !end) rows += b.rows;
  EXPECT_EQ(rows, kTotal);
  // The buffer's rows three times over, plus a few chunks in flight around
  // it (without compaction: ~10,000 rows).
  const int64_t in_use = static_cast<int64_t>(pipeline->memory().peak_live_bytes);
  EXPECT_LE(in_use, (3 * kBuffer + 8 * kBatch) * row_bytes) << in_use / row_bytes << " rows";

  // At a budget of 3/2 of the buffer and a few chunks, it compacts sooner
  // and keeps within the budget but for the elements in flight.
  const int64_t budget = (kBuffer * 3 / 2 + 4 * kBatch) * row_bytes;
  def.mutable_options()->set_memory_budget_bytes(budget);
  ASSERT_OK_AND_ASSIGN(auto bounded, Pipeline::Create(def));
  it = bounded->Iterate(0);
  rows = 0;
  while (it->Next(&b, &end).ok() && !end) rows += b.rows;
  EXPECT_EQ(rows, kTotal);
  const int64_t bounded_in_use = static_cast<int64_t>(bounded->memory().peak_live_bytes);
  EXPECT_LE(bounded_in_use, budget + 2 * kBatch * row_bytes) << bounded_in_use / row_bytes << " rows";
}

TEST_F(PipelineTest, LargeRecordsComeInChunksOfBoundedBytes) {
  // Eight records of 24 MiB, unbatched: a chunk of 128 of them took the
  // whole file, and its buffer was reserved at 128 rows of the mean (3.4 GB
  // held; 300 MB records ended the process).
  std::vector<std::string> records;
  for (int i = 0; i < 8; ++i) records.push_back(std::string(24 << 20, static_cast<char>('a' + i)));
  const std::string path = dir_.Join("large.tfrecord");
  testing::WriteTfRecords(path, records);
  records.clear();
  for (int readers : {1, 2}) {
    SCOPED_TRACE(absl::StrCat(readers, " readers"));
    ASSERT_OK_AND_ASSIGN(auto pipeline,
                         Pipeline::Create(PipelineBuilder::TfRecord({path, path}, {}).ParallelReads(readers).Build()));
    auto it = pipeline->Iterate(0);
    Batch b;
    bool end = false;
    std::string firsts;
    while (it->Next(&b, &end).ok() && !end) {
      EXPECT_LE(b.rows, 2);  // 64 MiB a chunk at most: a third row would pass it
      for (int64_t r = 0; r < b.rows; ++r) {
        const absl::string_view row = b.columns[0].RaggedRow(r);
        ASSERT_EQ(row.size(), size_t{24} << 20);
        EXPECT_EQ(row.find_first_not_of(row[0]), absl::string_view::npos);
        firsts.push_back(row[0]);
      }
    }
    EXPECT_EQ(firsts, "abcdefghabcdefgh");
    // Two readers hold the file (one split) each reads ahead: 192 MiB.
    EXPECT_LE(pipeline->memory().peak_held_bytes, (readers == 1 ? size_t{256} : size_t{512}) << 20);
  }
}

// Each chunk's ragged bytes, and the records' first bytes in order.
struct Chunked {
  std::vector<int64_t> bytes;
  std::string firsts;
};

Chunked ReadChunks(Pipeline& pipeline) {
  Chunked out;
  auto it = pipeline.Iterate(0);
  Batch b;
  bool end = false;
  while (it->Next(&b, &end).ok() && !end) {
    int64_t bytes = 0;
    for (int64_t r = 0; r < b.rows; ++r) {
      const absl::string_view row = b.columns[0].RaggedRow(r);
      bytes += static_cast<int64_t>(row.size());
      out.firsts.push_back(row.empty() ? '-' : row[0]);
    }
    out.bytes.push_back(bytes);
  }
  return out;
}

TEST_F(PipelineTest, ChunksOfLargeRecordsStayWithinTheirBytesFromSmallSplitsAndGrowingRecords) {
  // One 12 MiB record a file, read ahead two files at a time: a chunk cut
  // short at each file's end was topped up to 128 rows from the files after
  // it (600 MB in use for 288 MB of data).
  std::vector<std::string> files;
  std::string expected;
  for (int i = 0; i < 12; ++i) {
    files.push_back(dir_.Join(absl::StrCat("clip-", i, ".tfrecord")));
    testing::WriteTfRecords(files.back(), {std::string(12 << 20, static_cast<char>('a' + i))});
    expected.push_back(static_cast<char>('a' + i));
  }
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(PipelineBuilder::TfRecord(files, {}).ParallelReads(2).Build()));
  Chunked got = ReadChunks(*pipeline);
  EXPECT_EQ(got.firsts, expected);
  for (int64_t bytes : got.bytes) EXPECT_LE(bytes, int64_t{64} << 20);
  // The reads ahead fill the budget (256 MiB by default), and go past it
  // by a split the consumer waits for and the chunk it holds at most.
  EXPECT_LE(pipeline->memory().peak_live_bytes, size_t{256 + 2 * 64} << 20);
  // A small record, then large ones: the chunk's room, judged by the small
  // one, took the whole file (and its buffer grew a row at a time).
  const std::string mixed = dir_.Join("mixed.tfrecord");
  std::vector<std::string> records = {std::string(1024, 'A')};
  for (int i = 0; i < 10; ++i) records.push_back(std::string(16 << 20, static_cast<char>('a' + i)));
  testing::WriteTfRecords(mixed, records);
  records.clear();
  ASSERT_OK_AND_ASSIGN(pipeline, Pipeline::Create(PipelineBuilder::TfRecord({mixed}, {}).Build()));
  got = ReadChunks(*pipeline);
  EXPECT_EQ(got.firsts, "Aabcdefghij");
  // A chunk ends once a row more at its mean would pass 64 MiB: one past
  // it at most, the row that raised the mean.
  for (int64_t bytes : got.bytes) EXPECT_LE(bytes, (int64_t{64} << 20) + (int64_t{16} << 20));
  EXPECT_LE(pipeline->memory().peak_held_bytes, size_t{256} << 20);
}

TEST_F(PipelineTest, ExamplesOfHundredsOfFeaturesParse) {
  // Tabular and recommendation data: 64 features were the most declared.
  Example example;
  std::vector<TfRecordFeature> features;
  for (int i = 0; i < 300; ++i) {
    (*example.mutable_features()->mutable_feature())[absl::StrCat("f", i)].mutable_int64_list()->add_value(7 * i);
    features.push_back(Int64Feature(absl::StrCat("f", i)));
  }
  const std::string path = dir_.Join("wide.tfrecord");
  testing::WriteTfRecords(path, {example.SerializeAsString(), example.SerializeAsString()});
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(PipelineBuilder::TfRecord({path}, features).Batch(2).Build()));
  auto it = pipeline->Iterate(0);
  Batch b;
  bool end = false;
  ASSERT_TRUE(it->Next(&b, &end).ok() && !end);
  ASSERT_EQ(b.columns.size(), 300u);
  for (int i = 0; i < 300; ++i) EXPECT_EQ(b.columns[i].values.data<int64_t>()[1], 7 * i) << i;
}

TEST_F(PipelineTest, MissingFeatureNamesFeatureFileAndRecord) {
  std::vector<std::string> records;
  for (int i = 0; i < 5; ++i) records.push_back(testing::MakeExample(testing::CifarImage(i), i));
  Example bad;
  (*bad.mutable_features()->mutable_feature())["image"].mutable_bytes_list()->add_value(testing::CifarImage(5));
  records.push_back(bad.SerializeAsString());
  const std::string path = dir_.Join("bad.tfrecord");
  testing::WriteTfRecords(path, records);
  EXPECT_THAT(
      RunEpoch(
          PipelineBuilder::TfRecord({path}, {BytesFeature("image", 3072), Int64Feature("label")}).Batch(4).Build()),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("record 5 of " + path + ": feature 'label' missing")));
  // Under "skip", that record alone is left out, and counted.
  Skipped skipped;
  ASSERT_OK_AND_ASSIGN(Output out,
                       RunEpoch(PipelineBuilder::TfRecord({path}, {BytesFeature("image", 3072), Int64Feature("label")})
                                    .SkipCorruptRecords()
                                    .Batch(4)
                                    .Build(),
                                0, &skipped));
  EXPECT_EQ(out.labels, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(skipped.records, 1);
  EXPECT_THAT(skipped.summary, HasSubstr("feature 'label' missing"));
}

// A record refused before its variable-length bytes were parsed left that
// row's view of them unwritten, and gathering the chunk's bytes read it.
TEST_F(PipelineTest, UnderSkipARecordRefusedBeforeItsBytesFeatureCostsThatRecordAlone) {
  std::vector<std::string> records;
  std::vector<std::string> kept;
  for (int i = 0; i < 60; ++i) {
    Example count;  // serialized first, so the parser meets it before the bytes
    auto& values = *(*count.mutable_features()->mutable_feature())["count"].mutable_int64_list();
    for (int n = 0; n < (i % 7 == 3 ? 2 : 1); ++n) values.add_value(i);
    Example payload;
    const std::string bytes(1 + i % 5, static_cast<char>('a' + i % 26));
    (*payload.mutable_features()->mutable_feature())["payload"].mutable_bytes_list()->add_value(bytes);
    records.push_back(count.SerializeAsString() + payload.SerializeAsString());  // one Example, merged
    if (i % 7 != 3) kept.push_back(bytes);
  }
  const std::string path = dir_.Join("refused.tfrecord");
  testing::WriteTfRecords(path, records);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(absl::StrCat(threads, " threads"));
    ASSERT_OK_AND_ASSIGN(
        auto pipeline,
        Pipeline::Create(PipelineBuilder::TfRecord({path}, {BytesFeature("payload", 0), Int64Feature("count")})
                             .SkipCorruptRecords()
                             .Batch(16)
                             .Threads(threads)
                             .Build()));
    auto it = pipeline->Iterate(0);
    std::vector<std::string> got;
    Batch b;
    bool end = false;
    absl::Status s;
    while ((s = it->Next(&b, &end)).ok() && !end) {
      for (int64_t r = 0; r < b.rows; ++r) got.emplace_back(b.columns[0].RaggedRow(r));
    }
    SLUICE_ASSERT_OK(s);
    EXPECT_EQ(got, kept);
    EXPECT_EQ(it->skipped().skipped(), 60 - static_cast<int64_t>(kept.size()));
    EXPECT_THAT(it->skipped().Summary(), HasSubstr("feature 'count'"));
  }
}

TEST_F(PipelineTest, WrongFeatureLengthNamesFeatureFileAndRecord) {
  EXPECT_THAT(RunEpoch(PipelineBuilder::TfRecord({files_[1]}, {BytesFeature("image", 3000)}).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("record 0 of " + files_[1] + ": feature 'image': expected 3000 bytes, got 3072")));
}

TEST_F(PipelineTest, CorruptRecordFailsWithFileAndOffsetOrIsSkippedAndCounted) {
  // Record 2 of file 0 starts at 2 * (16 + record size).
  const std::string record = testing::MakeExample(testing::CifarImage(0), 0);
  const size_t offset = 2 * (16 + record.size());
  testing::IncrementByte(files_[0], offset + 12 + 100);
  auto labels = [&] { return PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")}); };
  EXPECT_THAT(RunEpoch(labels().Batch(8).Build()),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("data crc mismatch) in " + files_[0] + " at offset " + std::to_string(offset))));
  Skipped skipped;
  ASSERT_OK_AND_ASSIGN(Output out, RunEpoch(labels().SkipCorruptRecords().Batch(8).Build(), 0, &skipped));
  EXPECT_EQ(out.labels.size(), static_cast<size_t>(kRecords - 1));
  EXPECT_EQ(skipped.records, 1);
  EXPECT_THAT(skipped.summary, HasSubstr("at offset " + std::to_string(offset)));
}

// A row a kernel refuses fails the epoch naming the record, or under
// "skip" costs that row alone, counted with its file, whatever the threads.
TEST_F(PipelineTest, UnderSkipARowAKernelRefusesIsDroppedAndCountedNotItsBatch) {
  ops::OpRegistry registry;
  SLUICE_ASSERT_OK(ops::RegisterBuiltinOps(&registry));
  SLUICE_ASSERT_OK(testing::RegisterTestOps(&registry));
  auto run = [&](int64_t refused, bool skip, int threads, Skipped* skipped) -> absl::StatusOr<std::vector<int64_t>> {
    PipelineBuilder b = PipelineBuilder::TfRecord({files_[0]}, {Int64Feature("label")});
    if (skip) b.SkipCorruptRecords();
    const PipelineDef def = b.Map({Op("refuse_label", {{"label", refused}})}).Batch(4).Threads(threads).Build();
    SLUICE_ASSIGN_OR_RETURN(graph::CompiledPipeline compiled, graph::Compile(def, registry));
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> pipeline, Pipeline::FromCompiled(std::move(compiled)));
    std::unique_ptr<PipelineIterator> it = pipeline->Iterate();
    absl::Status status;
    Output out = Collect(it.get(), pipeline->output_schema(), &status);
    SLUICE_RETURN_IF_ERROR(status);
    if (skipped != nullptr) *skipped = {it->skipped().skipped(), it->skipped().Summary()};
    return out.labels;
  };
  ASSERT_OK_AND_ASSIGN(const std::vector<int64_t> all, run(/*refused=*/99, false, 1, nullptr));
  std::vector<int64_t> kept;
  std::copy_if(all.begin(), all.end(), std::back_inserter(kept), [](int64_t l) { return l != 6; });
  ASSERT_LT(kept.size(), all.size());
  EXPECT_THAT(run(6, false, 1, nullptr),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("label 6 refused in record 6 of " + files_[0])));
  for (int threads : {1, 2}) {
    Skipped skipped;
    ASSERT_OK_AND_ASSIGN(std::vector<int64_t> labels, run(6, true, threads, &skipped));
    EXPECT_EQ(labels, kept) << threads << " threads";
    EXPECT_EQ(skipped.records, static_cast<int64_t>(all.size() - kept.size()));
    EXPECT_THAT(skipped.summary, HasSubstr(files_[0] + ": " + std::to_string(all.size() - kept.size()) + " records"));
    EXPECT_THAT(skipped.summary,
                HasSubstr("node 'map_1': op 'refuse_label': label 6 refused in record 6 of " + files_[0]));
  }
}

// A chunk whose every row a kernel refuses is no element: it reached the
// consumer unbatched as a sample read past the chunk's end (another
// chunk's row, or memory no row was written to), batched as an empty batch.
TEST_F(PipelineTest, UnderSkipAChunkWhoseEveryRowIsRefusedYieldsNothing) {
  ops::OpRegistry registry;
  SLUICE_ASSERT_OK(ops::RegisterBuiltinOps(&registry));
  SLUICE_ASSERT_OK(testing::RegisterTestOps(&registry));
  constexpr int kRows = 1000;
  std::vector<int64_t> labels(kRows);
  std::vector<int64_t> kept;
  for (int i = 0; i < kRows; ++i) {
    labels[i] = i >= 256 && i < 768 ? -1 : i;  // whole chunks refused
    if (labels[i] >= 0) kept.push_back(i);
  }
  for (const bool batched : {false, true}) {
    SCOPED_TRACE(batched ? "batched" : "unbatched");
    PipelineBuilder b = PipelineBuilder::Arrays({MakeArrayColumn("label", {}, labels)}).SkipCorruptRecords();
    if (batched) b.Batch(4);
    const PipelineDef def = b.Map({Op("refuse_label", {{"label", -1}})}).Build();
    ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline compiled, graph::Compile(def, registry));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> pipeline, Pipeline::FromCompiled(std::move(compiled)));
    std::unique_ptr<PipelineIterator> it = pipeline->Iterate();
    std::vector<int64_t> got;
    while (true) {
      Batch element;
      bool end = false;
      SLUICE_ASSERT_OK(it->Next(&element, &end));
      if (end) break;
      ASSERT_GT(element.rows, 0);
      const int64_t* v = element.columns[0].values.data<int64_t>();
      got.insert(got.end(), v, v + element.rows);
    }
    EXPECT_EQ(got, kept);
  }
  // A shard's rank cannot leave the batch out: it would take a step fewer.
  const PipelineDef sharded = PipelineBuilder::Arrays({MakeArrayColumn("label", {}, labels)})
                                  .SkipCorruptRecords()
                                  .Shard(2, 0)
                                  .Batch(4)
                                  .Map({Op("refuse_label", {{"label", -1}})})
                                  .Build();
  ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline compiled, graph::Compile(sharded, registry));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> pipeline, Pipeline::FromCompiled(std::move(compiled)));
  std::unique_ptr<PipelineIterator> it = pipeline->Iterate();
  absl::Status status;
  for (bool end = false; status.ok() && !end;) {
    Batch element;
    status = it->Next(&element, &end);
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("this rank cannot keep step with the others")));
}

// A batch whose last rows a skipping map after it refused: its position
// is past them, so a resume groups the batches as the epoch did (it
// started at the refused row: every later batch one row off, and one more).
TEST_F(PipelineTest, UnderSkipAResumeAfterABatchWhoseLastRowsWereRefusedGroupsAsBefore) {
  ops::OpRegistry registry;
  SLUICE_ASSERT_OK(ops::RegisterBuiltinOps(&registry));
  SLUICE_ASSERT_OK(testing::RegisterTestOps(&registry));
  std::vector<int64_t> labels(24);
  for (int i = 0; i < 24; ++i) labels[i] = i == 11 || i == 3 ? -1 : i;
  const PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("label", {}, labels)})
                              .SkipCorruptRecords()
                              .Batch(6)
                              .Map({Op("refuse_label", {{"label", -1}})})
                              .Build();
  ASSERT_OK_AND_ASSIGN(graph::CompiledPipeline compiled, graph::Compile(def, registry));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> pipeline, Pipeline::FromCompiled(std::move(compiled)));
  auto batches = [](PipelineIterator* it, int most) {
    std::vector<std::vector<int64_t>> out;
    for (bool end = false; static_cast<int>(out.size()) < most;) {
      Batch b;
      EXPECT_TRUE(it->Next(&b, &end).ok());
      if (end) break;
      const int64_t* v = b.columns[0].values.data<int64_t>();
      out.emplace_back(v, v + b.rows);
    }
    return out;
  };
  const std::vector<std::vector<int64_t>> whole = batches(pipeline->Iterate().get(), 100);
  ASSERT_EQ(whole.size(), 4u);
  for (int k = 1; k < 4; ++k) {
    std::unique_ptr<PipelineIterator> it = pipeline->Iterate();
    batches(it.get(), k);
    ASSERT_OK_AND_ASSIGN(const std::string state, it->SaveState());
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<PipelineIterator> resumed, pipeline->Resume(state));
    EXPECT_EQ(batches(resumed.get(), 100), std::vector<std::vector<int64_t>>(whole.begin() + k, whole.end()))
        << "resumed after " << k;
  }
}

// Under "skip", a damaged length resynchronizes at the next good frame: a
// damaged stretch costs its own records, never the rest of the file, and a
// record-range split stops at its end even when the stretch crosses it.
TEST_F(PipelineTest, UnderSkipADamagedLengthCostsItsRecordsNotTheRestOfTheFile) {
  for (const std::string& f : files_) ASSERT_TRUE(io::WriteTfRecordIndex(f).ok());
  const size_t frame = 16 + testing::MakeExample(testing::CifarImage(0), 0).size();
  auto images = [&] {
    return PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", 3072)}).SkipCorruptRecords();
  };
  ASSERT_OK_AND_ASSIGN(Output clean, RunEpoch(images().Build()));
  const std::set<std::vector<uint8_t>> all(clean.rows0.begin(), clean.rows0.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kRecords));
  testing::IncrementByte(files_[1], 10 * frame + 2);  // record 10's length
  testing::IncrementByte(files_[0], 3 * frame + 1);   // records 3 and 4: the end of a 5-record split
  testing::IncrementByte(files_[0], 4 * frame + 9);   // (a length's crc)
  testing::IncrementByte(files_[2], 4 * frame + 0);   // records 4 and 5: across two splits
  testing::IncrementByte(files_[2], 5 * frame + 5);
  const auto expect_all_but_five = [&](const Output& out, const char* splits) {
    SCOPED_TRACE(splits);
    const std::set<std::vector<uint8_t>> got(out.rows0.begin(), out.rows0.end());
    EXPECT_EQ(out.rows0.size(), static_cast<size_t>(kRecords - 5));
    EXPECT_EQ(got.size(), out.rows0.size()) << "no record twice";
    EXPECT_TRUE(std::includes(all.begin(), all.end(), got.begin(), got.end()));
  };
  Skipped skipped;
  ASSERT_OK_AND_ASSIGN(Output whole_files, RunEpoch(images().Build(), 0, &skipped));
  expect_all_but_five(whole_files, "whole files");
  EXPECT_EQ(skipped.records, 3) << "without record ranges, a damaged stretch counts once";
  EXPECT_THAT(skipped.summary, HasSubstr(files_[1] + ": 1 record, " + std::to_string(frame) + " bytes"));
  ASSERT_OK_AND_ASSIGN(Output ranges, RunEpoch(images().SplitRecords(5).Build(), 0, &skipped));
  expect_all_but_five(ranges, "record ranges");
  EXPECT_EQ(skipped.records, 5);
  for (int f : {0, 2}) {
    EXPECT_THAT(skipped.summary, HasSubstr(files_[f] + ": 2 records, " + std::to_string(2 * frame) + " bytes"));
  }
}

TEST_F(PipelineTest, CardinalityIsKnownWhenEverySplitIsSized) {
  auto labels = [&] { return PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")}); };
  auto cardinality = [](PipelineDef def) {
    auto p = Pipeline::Create(def);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? (*p)->Cardinality() : -100;
  };
  EXPECT_EQ(cardinality(labels().Batch(30).Build()), Pipeline::kUnknown);  // unindexed
  for (const std::string& f : files_) ASSERT_TRUE(io::WriteTfRecordIndex(f).ok());
  EXPECT_EQ(cardinality(labels().Batch(30).Build()), 4) << "files read whole count by their index";
  EXPECT_EQ(cardinality(labels().SplitRecords(10).Build()), kRecords);
  EXPECT_EQ(cardinality(labels().SplitRecords(10).Batch(30).Build()), 4);
  EXPECT_EQ(cardinality(labels().SplitRecords(10).Batch(30, true).Repeat(2).Build()), 6);
  EXPECT_EQ(cardinality(labels().SplitRecords(10).Repeat().Take(5).Build()), 5);
  EXPECT_EQ(cardinality(labels().SplitRecords(10).Repeat().Build()), Pipeline::kInfinite);
  EXPECT_EQ(cardinality(labels().SplitRecords(10).Filter(Op("keep_if", {{"cmp", "<"}, {"value", 3.0}})).Build()),
            Pipeline::kUnknown);
}

TEST_F(PipelineTest, ArraysFeedThePipelineLikeFiles) {
  std::vector<float> x;
  std::vector<int64_t> label;
  for (int i = 0; i < 10; ++i) {
    x.insert(x.end(), {float(i), float(-i)});
    label.push_back(i);
  }
  PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("x", {2}, x), MakeArrayColumn("label", {}, label)})
                        .Map({Op("rescale", {{"field", "x"}, {"scale", 2.0}})})
                        .Batch(4)
                        .Build();
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(def));
  EXPECT_EQ(pipeline->Cardinality(), 3);
  ASSERT_OK_AND_ASSIGN(Output out, RunEpoch(def));
  EXPECT_EQ(out.rows, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(out.labels, label);
  float row9[2];
  std::memcpy(row9, out.rows0[9].data(), sizeof(row9));
  EXPECT_EQ(row9[0], 18.0f);
  EXPECT_EQ(row9[1], -18.0f);
}

// MNIST's images are a read-only mapping of the file, viewed by the
// source's chunks: a batch handed on without a map in between is copied
// out of it, so that the consumer may write it, and the file (and the next
// epoch) keeps its bytes.
TEST_F(PipelineTest, BatchesOfAMappedFileAreTheConsumersToWrite) {
  std::vector<uint8_t> images(20 * 4 * 3), labels(20, 1);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<uint8_t>(i);
  const std::string image_file = dir_.Join("images-idx3-ubyte"), label_file = dir_.Join("labels-idx1-ubyte");
  SLUICE_ASSERT_OK(io::WriteIdxFile(image_file, {20, 4, 3}, images.data()));
  SLUICE_ASSERT_OK(io::WriteIdxFile(label_file, {20}, labels.data()));
  ASSERT_OK_AND_ASSIGN(auto pipeline,
                       Pipeline::Create(PipelineBuilder::Mnist(image_file, label_file).Batch(8).Build()));
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::unique_ptr<PipelineIterator> it = pipeline->Iterate(epoch);
    Batch batch;
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&batch, &end));
    ASSERT_FALSE(end);
    const Tensor& image = batch.columns[0].values;
    ASSERT_FALSE(image.buffer()->read_only());
    EXPECT_EQ(image.data<uint8_t>()[5], 5) << "epoch " << epoch;
    image.raw_data()[5] = 200;  // the consumer's to write
  }
  EXPECT_EQ(testing::ReadFileBytes(image_file)[16 + 5], 5);
}

TEST_F(PipelineTest, ARepeatKeepsChunksWholeAcrossItsEpochsSoBatchesPassThroughTheMap) {
  // 100 records, batches of 30: each epoch ends with a 10-row chunk. The
  // repeat re-cuts, so the map after it sees 30-row chunks only (10 of
  // them for 3 epochs) and the batch node passes them through.
  ASSERT_OK_AND_ASSIGN(auto pipeline,
                       Pipeline::Create(PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")})
                                            .Repeat(3)
                                            .Map({Op("cast", {{"field", "label"}, {"dtype", "float32"}})})
                                            .Batch(30)
                                            .Build()));
  auto it = pipeline->Iterate();
  std::vector<int64_t> rows;
  std::map<float, int> seen;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_ASSERT_OK(it->Next(&b, &end));
    if (end) break;
    rows.push_back(b.rows);
    for (int64_t r = 0; r < b.rows; ++r) ++seen[b.columns[0].values.data<float>()[r]];
  }
  EXPECT_EQ(rows, std::vector<int64_t>(10, 30));
  int64_t total = 0;
  for (const auto& [label, n] : seen) total += n;
  EXPECT_EQ(total, 3 * kRecords);
  ASSERT_NE(it->stats(), nullptr);
  const PipelineStatsSnapshot s = it->stats()->Snapshot();
  ASSERT_EQ(s.nodes.size(), 5u);  // source, parse_example, repeat, map, batch
  EXPECT_EQ(s.nodes[3].elements, 10);
  EXPECT_EQ(s.nodes[3].rows, 3 * kRecords);
}

TEST_F(PipelineTest, StatsCountEveryNodesElementsAndEachOpsTime) {
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(W2Like(2).Build()));
  auto it = pipeline->Iterate();
  int batches = 0;
  Batch b;
  bool end = false;
  while (true) {
    SLUICE_ASSERT_OK(it->Next(&b, &end));
    if (end) break;
    ++batches;
  }
  ASSERT_NE(it->stats(), nullptr);
  const PipelineStatsSnapshot s = it->stats()->Snapshot();
  ASSERT_EQ(s.nodes.size(), 5u);  // source, map, batch, map, prefetch
  EXPECT_EQ(s.nodes[0].rows, kRecords);
  EXPECT_EQ(s.nodes[2].elements, (kRecords + 15) / 16);
  EXPECT_EQ(s.nodes[4].rows, kRecords);
  EXPECT_EQ(s.nodes[4].elements, batches);
  EXPECT_EQ(s.consumer_calls, batches);
  EXPECT_GT(s.nodes[0].busy_ns, 0);  // reading
  // The per-sample map: parse, reshape (a view: never runs), dilation, blur.
  const NodeStatsSnapshot& map = s.nodes[1];
  EXPECT_THAT(map.op_names, ::testing::ElementsAre("parse_example", "reshape", "grey_dilation", "gaussian_blur"));
  EXPECT_EQ(map.op_busy_ns[1], 0);
  EXPECT_GT(map.op_busy_ns[2], 0);
  EXPECT_GT(map.op_busy_ns[3], 0);
  int64_t ops = 0;
  for (int64_t ns : map.op_busy_ns) ops += ns;
  EXPECT_LE(ops, map.busy_ns);
  EXPECT_EQ(map.input_wait_ns, s.nodes[0].get_next_ns);
}

TEST_F(PipelineTest, StatsAndAutotuneCanBeTurnedOff) {
  PipelineDef def = W2Like(2).Build();
  def.mutable_options()->set_no_stats(true);
  def.mutable_options()->set_no_autotune(true);
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(def));
  auto it = pipeline->Iterate();
  EXPECT_EQ(it->stats(), nullptr);
  EXPECT_EQ(it->autotune(), nullptr);
}

TEST_F(PipelineTest, CancelEndsANextBlockedInAnotherThread) {
  // Drops every sample of an endless repeat, so Next never finds one.
  PipelineDef def = PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")})
                        .Repeat()
                        .Filter(Op("keep_if", {{"cmp", "<"}, {"value", -1.0}}))
                        .Batch(8)
                        .Build();
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(def));
  auto it = pipeline->Iterate();
  absl::Status status;
  std::thread consumer([&] {
    Batch b;
    bool end = false;
    status = it->Next(&b, &end);
  });
  it->Cancel();
  consumer.join();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
}

TEST_F(PipelineTest, SplitAtADistributeNodeTheTwoPartsGiveTheWholesOutput) {
  const PipelineDef whole = W2Like(2).Build();
  PipelineDef split = whole;  // distribute after the first map (parse, dilation, blur)
  NodeDef distribute;
  distribute.mutable_distribute();
  split.mutable_nodes()->Add(std::move(distribute));
  for (int i = split.nodes_size() - 1; i > 2; --i) split.mutable_nodes()->SwapElements(i, i - 1);
  ASSERT_EQ(split.nodes(2).kind_case(), NodeDef::kDistribute);

  EXPECT_THAT(Pipeline::Create(split), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("create this pipeline through the service client")));
  ASSERT_OK_AND_ASSIGN(auto workers, Pipeline::Create(split, {0, 2, Schema(), false}, nullptr));
  const graph::CompileRange consumer{2, -1, workers->output_schema(), workers->batched()};
  ASSERT_OK_AND_ASSIGN(auto local,
                       Pipeline::Create(split, consumer, std::make_shared<PipelineAsRemoteInput>(std::move(workers))));
  auto it = local->Iterate(0);
  absl::Status status;
  const Output got = Collect(it.get(), local->output_schema(), &status);
  SLUICE_ASSERT_OK(status);
  ASSERT_OK_AND_ASSIGN(Output expected, RunEpoch(whole));
  EXPECT_EQ(got.rows, expected.rows);
  EXPECT_TRUE(got.bytes == expected.bytes);  // random draws included
}

TEST_F(PipelineTest, IterateSplitsReadsOnlyTheGivenSplitsInOrder) {
  for (const std::string& f : files_) ASSERT_TRUE(io::WriteTfRecordIndex(f).ok());
  const PipelineDef def =
      PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", 3072)}).SplitRecords(5).Build();
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(def));
  ASSERT_OK_AND_ASSIGN(Output all, RunEpoch(def));
  const std::vector<io::Split> splits = pipeline->Splits();
  EXPECT_EQ(&pipeline->Splits(), &pipeline->Splits()) << "listed once, not on each call";
  std::vector<int64_t> first_row{0};  // of each split in a whole epoch
  for (const io::Split& s : splits) first_row.push_back(first_row.back() + s.end_record - s.begin_record);

  auto it = pipeline->IterateSplits(0, {splits[7], splits[2]});
  absl::Status status;
  const Output got = Collect(it.get(), pipeline->output_schema(), &status);
  SLUICE_ASSERT_OK(status);
  std::vector<std::vector<uint8_t>> expected;
  for (int s : {7, 2}) {
    for (int64_t r = first_row[s]; r < first_row[s + 1]; ++r) expected.push_back(all.rows0[r]);
  }
  EXPECT_EQ(got.rows0.size(), expected.size());
  EXPECT_TRUE(got.rows0 == expected);
}

// A service worker runs thousands of one-image splits an epoch, each with
// an iterator of its own: one over a single record runs on one thread (one
// map runner), not on each of the pipeline's.
TEST_F(PipelineTest, AnIteratorOverOneRecordRunsOnOneThread) {
  for (const std::string& f : files_) ASSERT_TRUE(io::WriteTfRecordIndex(f).ok());
  auto def = [&](int64_t split_records) {
    return PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", 3072)})
        .SplitRecords(split_records)
        .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("random_flip")})
        .Threads(8)
        .Build();
  };
  ASSERT_OK_AND_ASSIGN(auto single, Pipeline::Create(def(1)));
  ASSERT_OK_AND_ASSIGN(auto ranges, Pipeline::Create(def(5)));
  const std::vector<io::Split> records = single->Splits();
  EXPECT_EQ(single->IterateSplits(0, {records[3]})->threads(), 1);
  EXPECT_EQ(single->IterateSplits(0, {records[3], records[4], records[9]})->threads(), 3);
  EXPECT_EQ(ranges->IterateSplits(0, {ranges->Splits()[0], ranges->Splits()[1]})->threads(), 8);
  EXPECT_EQ(single->Iterate(0)->threads(), 8);
  auto one = single->IterateSplits(0, {records[3]});
  absl::Status status;
  const Output got = Collect(one.get(), single->output_schema(), &status);
  SLUICE_ASSERT_OK(status);
  ASSERT_OK_AND_ASSIGN(Output all, RunEpoch(def(1)));
  ASSERT_EQ(got.rows0.size(), 1u);
  EXPECT_EQ(got.rows0[0], all.rows0[3]);
}

TEST_F(PipelineTest, IndexedFilesSplitIntoRecordRanges) {
  for (const std::string& f : files_) ASSERT_TRUE(io::WriteTfRecordIndex(f).ok());
  PipelineDef def =
      PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {Int64Feature("label")}).SplitRecords(5).Batch(100).Build();
  ASSERT_OK_AND_ASSIGN(auto pipeline, Pipeline::Create(def));
  EXPECT_EQ(pipeline->compiled().nodes[0].format->MakeSplits().size(), 21u);  // 34, 33, 33 records
  ASSERT_OK_AND_ASSIGN(Output out, RunEpoch(def));
  std::vector<int64_t> expected;
  for (int i = 0; i < kRecords; ++i) expected.push_back(i % 10);
  EXPECT_EQ(out.labels, expected);
}

}  // namespace
}  // namespace sluice::exec
