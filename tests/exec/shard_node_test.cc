// The shard node in real pipelines, each shard a pipeline of its own in one
// process (what a data-parallel job's ranks run): the shards' parts are the
// epoch exactly once, every shard yields as many batches, the global batch
// of a step is the same samples with the same augmentation at any number
// of shards, and a state saved by N shards resumes on M.
#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::exec {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kRows = 103;

// kRows rows: "id" (its number) and "image" (8x8x3 levels of it).
PipelineBuilder Rows(int rows = kRows) {
  std::vector<int64_t> ids(rows);
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<uint8_t> pixels(static_cast<size_t>(rows) * 8 * 8 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 7 + i / 192) % 251);
  return PipelineBuilder::Arrays({MakeArrayColumn("id", {}, ids), MakeArrayColumn("image", {8, 8, 3}, pixels)})
      .SplitRecords(10)
      .ShuffleSplits();
}

// Shard `index` of `shards` of `base` (shuffled, then augmented after the
// shard), in batches of `global / shards`.
PipelineDef Sharded(PipelineBuilder base, int shards, int index, int64_t global, const std::string& uneven = "drop") {
  return base.Shuffle(17)
      .Shard(shards, index, uneven)
      .Map({Op("random_flip"), Op("random_rotation", {{"degrees", 30.0}})})
      .Batch(global / shards)
      .Seed(9)
      .Build();
}

struct Element {
  std::vector<int64_t> ids;
  std::vector<uint8_t> bytes;  // every column's
  std::vector<uint8_t> padding;
};

// `padding`: the index of the "is_padding" column, if any.
Element Copy(const Batch& b, std::optional<int> padding) {
  Element e;
  const int64_t* ids = b.columns[0].values.data<int64_t>();
  e.ids.assign(ids, ids + b.rows);
  for (const Column& c : b.columns)
    e.bytes.insert(e.bytes.end(), c.values.raw_data(), c.values.raw_data() + c.values.byte_size());
  if (padding) {
    const uint8_t* p = b.columns[*padding].values.data<uint8_t>();
    e.padding.assign(p, p + b.rows);
  }
  return e;
}

// Every element of `it`, or the first `limit`.
absl::StatusOr<std::vector<Element>> Drain(PipelineIterator* it, std::optional<int> padding, int limit = -1) {
  std::vector<Element> out;
  while (limit < 0 || static_cast<int>(out.size()) < limit) {
    Batch b;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(it->Next(&b, &end));
    if (end) break;
    out.push_back(Copy(b, padding));
  }
  return out;
}

absl::StatusOr<std::vector<Element>> Epoch(const PipelineDef& def, uint64_t epoch = 0) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> p, Pipeline::Create(def));
  std::unique_ptr<PipelineIterator> it = p->Iterate(epoch);
  return Drain(it.get(), p->output_schema().Find("is_padding"));
}

// Each shard's elements, by shard.
absl::StatusOr<std::vector<std::vector<Element>>> AllShards(const PipelineBuilder& base, int shards, int64_t global,
                                                            const std::string& uneven = "drop") {
  std::vector<std::vector<Element>> out;
  for (int r = 0; r < shards; ++r) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<Element> e, Epoch(Sharded(base, shards, r, global, uneven)));
    out.push_back(std::move(e));
  }
  return out;
}

// The global batches: each step's shard elements, in shard order.
std::vector<Element> Global(const std::vector<std::vector<Element>>& shards) {
  std::vector<Element> out(shards[0].size());
  for (size_t s = 0; s < out.size(); ++s) {
    for (const std::vector<Element>& shard : shards) {
      out[s].ids.insert(out[s].ids.end(), shard[s].ids.begin(), shard[s].ids.end());
    }
  }
  return out;
}

TEST(ShardNode, TheShardsPartsAreTheEpochExactlyOnceForOneToEightShards) {
  for (int shards = 1; shards <= 8; ++shards) {
    SCOPED_TRACE(::testing::Message() << shards << " shards");
    const int64_t global = 2 * shards;  // 2 rows a shard a step
    ASSERT_OK_AND_ASSIGN(const auto parts, AllShards(Rows(), shards, global));
    std::multiset<int64_t> seen;
    for (const auto& shard : parts) {
      EXPECT_EQ(shard.size(), parts[0].size());  // the same steps on every shard
      for (const Element& e : shard) seen.insert(e.ids.begin(), e.ids.end());
    }
    // Less fewer than one global batch; one shard keeps them (the batch would).
    EXPECT_EQ(seen.size(), static_cast<size_t>(shards == 1 ? kRows : kRows / global * global));
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size());  // none twice
  }
}

TEST(ShardNode, TheGlobalBatchesAreTheSameBytesAtOneTwoAndFourShards) {
  ASSERT_OK_AND_ASSIGN(const auto one, AllShards(Rows(), 1, 8));
  for (int shards : {2, 4}) {
    ASSERT_OK_AND_ASSIGN(const auto parts, AllShards(Rows(), shards, 8));
    const std::vector<Element> global = Global(parts);
    ASSERT_EQ(global.size() + 1, one[0].size()) << "one shard keeps the short last batch";
    for (size_t s = 0; s < global.size(); ++s) {
      EXPECT_EQ(global[s].ids, one[0][s].ids) << shards << " shards, step " << s;
      // The augmented pixels too: shard r's bytes are rows [r*B, (r+1)*B) of the step's.
      std::vector<uint8_t> joined;
      for (const auto& shard : parts) {
        const Element& e = shard[s];
        joined.insert(joined.end(), e.bytes.begin() + e.ids.size() * 8, e.bytes.end());
      }
      std::vector<uint8_t> whole(one[0][s].bytes.begin() + one[0][s].ids.size() * 8, one[0][s].bytes.end());
      EXPECT_TRUE(joined == whole) << shards << " shards, step " << s;
    }
  }
}

TEST(ShardNode, FilesOfVeryDifferentLengthsGiveEveryShardAsManyBatches) {
  sluice::testing::TempDir dir;
  for (const char* d : {"a", "b", "c"}) std::filesystem::create_directory(dir.Join(d));
  sluice::testing::WriteCifarTfRecords(dir.Join("a"), 5, 1);
  sluice::testing::WriteCifarTfRecords(dir.Join("b"), 50, 1);
  sluice::testing::WriteCifarTfRecords(dir.Join("c"), 200, 1);
  const PipelineBuilder files = PipelineBuilder::TfRecord({dir.Join("*/*.tfrecord")}, {Int64Feature("label")});
  for (const char* uneven : {"drop", "pad"}) {
    std::vector<size_t> counts;
    int64_t padded = 0, rows = 0;
    for (int r = 0; r < 3; ++r) {
      ASSERT_OK_AND_ASSIGN(std::vector<Element> e,
                           Epoch(PipelineBuilder(files).Shard(3, r, uneven).Batch(16).Seed(1).Build()));
      counts.push_back(e.size());
      for (const Element& x : e) {
        rows += static_cast<int64_t>(x.ids.size());
        padded += std::count(x.padding.begin(), x.padding.end(), 1);
      }
    }
    SCOPED_TRACE(uneven);
    EXPECT_EQ(counts, std::vector<size_t>(3, counts[0]));
    // 255 rows in global batches of 48: 5 whole ones, and a sixth padded
    // with the first 33 rows again.
    EXPECT_EQ(counts[0], std::string(uneven) == "drop" ? 5u : 6u);
    EXPECT_EQ(rows, std::string(uneven) == "drop" ? 240 : 288);
    EXPECT_EQ(padded, std::string(uneven) == "drop" ? 0 : 33);
  }
}

TEST(ShardNode, PadMarksTheFillAndFillsWithTheShortBatchsOwnRows) {
  // 103 rows, global batches of 12: 8 whole, a ninth with 7 rows and 5 pads.
  std::vector<Element> all;
  for (int r = 0; r < 3; ++r) {
    ASSERT_OK_AND_ASSIGN(std::vector<Element> e, Epoch(Rows().Shard(3, r, "pad").Batch(4).Seed(1).Build()));
    ASSERT_EQ(e.size(), 9u);
    all.push_back(e.back());
  }
  ASSERT_OK_AND_ASSIGN(std::vector<Element> unsharded, Epoch(Rows().Batch(12).Seed(1).Build()));
  std::vector<int64_t> last_ids, last_padding;
  for (const Element& e : all) {
    last_ids.insert(last_ids.end(), e.ids.begin(), e.ids.end());
    last_padding.insert(last_padding.end(), e.padding.begin(), e.padding.end());
  }
  const std::vector<int64_t> real(unsharded.back().ids);
  ASSERT_EQ(real.size(), 7u);
  EXPECT_EQ(std::vector<int64_t>(last_ids.begin(), last_ids.begin() + 7), real);
  EXPECT_EQ(std::vector<int64_t>(last_ids.begin() + 7, last_ids.end()),
            std::vector<int64_t>(real.begin(), real.begin() + 5));
  EXPECT_EQ(last_padding, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}));
}

// The fill comes from rows a resumed epoch reads too: its last batches are
// the uninterrupted epoch's, fill and all.
TEST(ShardNode, APaddedEpochResumedMidwayEndsWithTheSameFill) {
  for (int r = 0; r < 3; ++r) {
    const PipelineDef def = Rows().Shuffle(20).Shard(3, r, "pad").Batch(4).Seed(1).Build();
    ASSERT_OK_AND_ASSIGN(const std::vector<Element> whole, Epoch(def));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> p, Pipeline::Create(def));
    std::unique_ptr<PipelineIterator> it = p->Iterate(0);
    SLUICE_ASSERT_OK(Drain(it.get(), std::nullopt, 3).status());
    ASSERT_OK_AND_ASSIGN(const std::string state, it->SaveState());
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<PipelineIterator> resumed, p->Resume(state));
    ASSERT_OK_AND_ASSIGN(const std::vector<Element> rest, Drain(resumed.get(), p->output_schema().Find("is_padding")));
    ASSERT_EQ(rest.size(), whole.size() - 3);
    for (size_t s = 0; s < rest.size(); ++s) {
      EXPECT_EQ(rest[s].ids, whole[s + 3].ids) << "shard " << r << " step " << s + 3;
      EXPECT_EQ(rest[s].padding, whole[s + 3].padding) << "shard " << r << " step " << s + 3;
    }
  }
}

// Shard `index` of `shards`, resumed from `state` (or from the start).
absl::StatusOr<std::vector<Element>> Rest(int shards, int index, const std::string& state, int64_t global) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> p, Pipeline::Create(Sharded(Rows(), shards, index, global)));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<PipelineIterator> it, p->Resume(state));
  return Drain(it.get(), std::nullopt);
}

TEST(ShardNode, AStateSavedByNShardsResumesOnMWithTheRestOfTheEpochAndItsAugmentation) {
  constexpr int64_t kGlobal = 12;
  ASSERT_OK_AND_ASSIGN(const auto whole, AllShards(Rows(), 1, kGlobal));
  for (auto [n, m] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{4, 3}}) {
    SCOPED_TRACE(::testing::Message() << n << " -> " << m << " shards");
    // N shards train 3 steps, each saving its state after them.
    std::vector<std::string> states;
    std::vector<std::vector<Element>> before(n);
    for (int r = 0; r < n; ++r) {
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> p, Pipeline::Create(Sharded(Rows(), n, r, kGlobal)));
      std::unique_ptr<PipelineIterator> it = p->Iterate(0);
      ASSERT_OK_AND_ASSIGN(before[r], Drain(it.get(), std::nullopt, 3));
      ASSERT_OK_AND_ASSIGN(std::string state, it->SaveState());
      states.push_back(state);
    }
    for (const std::string& s : states) EXPECT_EQ(s, states[0]);  // every shard's state is the job's
    std::vector<std::vector<Element>> after(m);
    for (int r = 0; r < m; ++r) {
      ASSERT_OK_AND_ASSIGN(after[r], Rest(m, r, states[r % n], kGlobal));
    }
    std::vector<Element> steps = Global(before);
    const std::vector<Element> rest = Global(after);
    steps.insert(steps.end(), rest.begin(), rest.end());
    // The uninterrupted one-shard epoch ends with the short batch that M > 1 shards leave out.
    ASSERT_EQ(steps.size(), whole[0].size() - (m == 1 ? 0 : 1));
    for (size_t s = 0; s < steps.size(); ++s) EXPECT_EQ(steps[s].ids, whole[0][s].ids) << "step " << s;
    // The augmentation follows each sample: row r of shard r's part of step 3.
    const Element& resumed = after[0][0];
    const Element& uninterrupted = whole[0][3];
    const size_t image_bytes = 8 * 8 * 3, id_bytes = resumed.ids.size() * 8;
    EXPECT_TRUE(std::equal(resumed.bytes.begin() + id_bytes, resumed.bytes.end(),
                           uninterrupted.bytes.begin() + uninterrupted.ids.size() * 8))
        << "the resumed first sample's pixels differ" << image_bytes;
  }
}

TEST(ShardNode, AStateOfAnotherGlobalBatchOrUnevenModeIsRefusedNamingBoth) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> p, Pipeline::Create(Sharded(Rows(), 2, 0, 12)));
  std::unique_ptr<PipelineIterator> it = p->Iterate(0);
  SLUICE_ASSERT_OK(Drain(it.get(), std::nullopt, 2).status());
  ASSERT_OK_AND_ASSIGN(std::string state, it->SaveState());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> other, Pipeline::Create(Sharded(Rows(), 2, 0, 16)));
  EXPECT_THAT(other->Resume(state).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("saved with a global batch of 12 (2 shards of 6, uneven \"drop\") but this pipeline "
                                 "has a global batch of 16 (2 shards of 8, uneven \"drop\"): the rest of the epoch "
                                 "needs the batch size it was saved with")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> more, Pipeline::Create(Sharded(Rows(), 4, 0, 16)));
  EXPECT_THAT(more->Resume(state).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(4 shards of 4, uneven \"drop\"): another number of shards needs the same global "
                                 "batch")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> padded, Pipeline::Create(Sharded(Rows(), 1, 0, 12, "pad")));
  EXPECT_THAT(padded->Resume(state).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("but this pipeline has a global batch of 12 (1 shard of 12, uneven \"pad\"): the rest "
                                 "of the epoch needs the uneven mode it was saved with")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> unsharded,
                       Pipeline::Create(Rows().Shuffle(17).Map({Op("random_flip")}).Batch(6).Seed(9).Build()));
  EXPECT_THAT(unsharded->Resume(state).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("the state is another pipeline's"),
                             HasSubstr("saved by a rank of a data-parallel job (a shard node of 2 shards) and this "
                                       "pipeline has no shard node"))));
  // The reverse: one process's state, without a shard node, on a rank.
  std::unique_ptr<PipelineIterator> alone = unsharded->Iterate(0);
  SLUICE_ASSERT_OK(Drain(alone.get(), std::nullopt, 2).status());
  ASSERT_OK_AND_ASSIGN(std::string unsharded_state, alone->SaveState());
  EXPECT_THAT(p->Resume(unsharded_state).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("saved without a shard node (by one process, outside a data-parallel job) and this "
                                 "pipeline shards its epochs (2 shards)")));
}

TEST(ShardNode, ADamagedShardedStateIsDataLossWithNoGuessFromItsDamagedFields) {
  // A flipped bit in the shard's fields read as "saved without a shard
  // node", an InvalidArgument telling the user to resume in one process.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> p, Pipeline::Create(Sharded(Rows(), 2, 0, 12)));
  std::unique_ptr<PipelineIterator> it = p->Iterate(0);
  SLUICE_ASSERT_OK(Drain(it.get(), std::nullopt, 2).status());
  ASSERT_OK_AND_ASSIGN(const std::string state, it->SaveState());
  int damaged = 0;
  for (size_t bit = 0; bit < 8 * state.size(); ++bit) {
    std::string flipped = state;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    const absl::Status resumed = p->Resume(flipped).status();
    if (!absl::StrContains(resumed.message(), "damaged")) continue;
    ++damaged;
    EXPECT_THAT(resumed, StatusIs(absl::StatusCode::kDataLoss, Not(HasSubstr("shard node")))) << "bit " << bit;
  }
  EXPECT_GT(damaged, 0);
}

TEST(ShardNode, BadShardsAndPlacesAreNamed) {
  EXPECT_THAT(Pipeline::Create(Rows().Shard(2, 2).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index must be in [0, 2), got 2")));
  EXPECT_THAT(Pipeline::Create(Rows().Shard(-1, 0).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_shards must be >= 1")));
  EXPECT_THAT(Pipeline::Create(Rows().Shard(2, 0, "even").Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("uneven must be \"drop\" or \"pad\"")));
  EXPECT_THAT(Pipeline::Create(Rows().Batch(4).Shard(2, 0).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a batch (nodes[1])")));
  EXPECT_THAT(Pipeline::Create(
                  Rows().Shard(2, 0).Filter(Op("keep_if", {{"field", "id"}, {"cmp", "<"}, {"value", 3.0}})).Build())
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a filter (nodes[2])")));
}

// num_shards 0 takes the job's from torchrun's $WORLD_SIZE and $RANK; a
// launcher that set only the first (and LOCAL_RANK) would give every rank
// shard 0.
TEST(ShardNode, TheJobsShardsFromTheEnvironmentAreCheckedAndNamed) {
  setenv("WORLD_SIZE", "2", 1);
  setenv("LOCAL_RANK", "1", 1);
  EXPECT_THAT(Pipeline::Create(Rows().Shard(0, 0).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("$WORLD_SIZE is 2 but $RANK is not set (torchrun sets both; LOCAL_RANK is the rank "
                                 "on its node only)")));
  setenv("RANK", "-1", 1);
  EXPECT_THAT(Pipeline::Create(Rows().Shard(0, 0).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index must be in [0, 2), got -1 (from $RANK)")));
  setenv("RANK", "1", 1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> p, Pipeline::Create(Rows().Shard(0, 0).Batch(4).Build()));
  EXPECT_EQ(p->Cardinality(), kRows / 8);
  EXPECT_THAT(Pipeline::Create(Rows().Shard(0, 1).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 1 with num_shards 0")));
  setenv("WORLD_SIZE", "0", 1);
  EXPECT_THAT(Pipeline::Create(Rows().Shard(0, 0).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got 0 (from $WORLD_SIZE)")));
  for (const char* name : {"WORLD_SIZE", "LOCAL_RANK", "RANK"}) unsetenv(name);
}

// The length says it before the epoch does: not 0 batches, the error.
TEST(ShardNode, AnEpochWithFewerRowsThanShardsFailsSayingSo) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> p, Pipeline::Create(Rows(3).Shard(4, 0, "pad").Build()));
  std::unique_ptr<PipelineIterator> it = p->Iterate(0);
  EXPECT_THAT(Drain(it.get(), std::nullopt).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the epoch has 3 rows for 4 shards")));
  EXPECT_THAT(p->Length().status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the epoch has 3 rows for 4 shards")));
  EXPECT_EQ(p->Cardinality(), Pipeline::kUnknown);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> q, Pipeline::Create(Rows(10).Shard(2, 1).Batch(8).Build()));
  it = q->Iterate(0);
  EXPECT_THAT(Drain(it.get(), std::nullopt).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("make no global batch of 16")));
  EXPECT_THAT(q->Length().status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("make no global batch of 16")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> padded,
                       Pipeline::Create(Rows(10).Shard(2, 1, "pad").Batch(8).Build()));
  ASSERT_OK_AND_ASSIGN(const int64_t batches, padded->Length());
  EXPECT_EQ(batches, 1);
}

// A one-rank job (evaluation on rank 0) sees every sample: its one shard
// keeps the short last batch unless the batch drops it.
TEST(ShardNode, OneShardKeepsTheShortLastBatchAsTheBatchWould) {
  ASSERT_OK_AND_ASSIGN(const std::vector<Element> kept, Epoch(Rows().Shard(1, 0).Batch(10).Build()));
  ASSERT_EQ(kept.size(), 11u);
  EXPECT_EQ(kept.back().ids.size(), 3u);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> p, Pipeline::Create(Rows().Shard(1, 0).Batch(10).Build()));
  EXPECT_EQ(p->Cardinality(), 11);
  ASSERT_OK_AND_ASSIGN(const std::vector<Element> dropped, Epoch(Rows().Shard(1, 0).Batch(10, true).Build()));
  EXPECT_EQ(dropped.size(), 10u);
  ASSERT_OK_AND_ASSIGN(const std::vector<Element> few, Epoch(Rows(7).Shard(1, 0).Batch(10).Build()));
  ASSERT_EQ(few.size(), 1u) << "fewer rows than a batch are no error for one shard";
  EXPECT_EQ(few[0].ids.size(), 7u);
}

TEST(ShardNode, TheCardinalityIsEveryShardsEqualBatchCount) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> drop, Pipeline::Create(Rows().Shard(3, 1).Batch(4).Build()));
  EXPECT_EQ(drop->Cardinality(), kRows / 12);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Pipeline> pad, Pipeline::Create(Rows().Shard(3, 1, "pad").Batch(4).Build()));
  EXPECT_EQ(pad->Cardinality(), (kRows + 11) / 12);
}

}  // namespace
}  // namespace sluice::exec
