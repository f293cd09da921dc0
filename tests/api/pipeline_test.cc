// The public C++ API (include/sluice/pipeline.h) as a trainer uses it: a
// checkpoint's SaveState and a new Pipeline's Resume give exactly the rest
// of the epoch; a state of another pipeline is refused naming why.
#include "sluice/pipeline.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

PipelineBuilder Ids(int64_t rows, int64_t batch) {
  std::vector<int64_t> ids(rows);
  std::iota(ids.begin(), ids.end(), 0);
  return std::move(PipelineBuilder::Arrays({MakeArrayColumn("id", {}, ids)})
                       .SplitRecords(10)
                       .ShuffleSplits()
                       .Shuffle(16)
                       .Batch(batch)
                       .Seed(7));
}

// The ids of up to `limit` more batches (all that are left when < 0).
std::vector<int64_t> Drain(Iterator* it, int limit) {
  std::vector<int64_t> ids;
  for (int n = 0; limit < 0 || n < limit; ++n) {
    Batch b;
    bool end = false;
    EXPECT_TRUE(it->Next(&b, &end).ok());
    if (end) break;
    const int64_t* v = b.columns[0].values.data<int64_t>();
    ids.insert(ids.end(), v, v + b.rows);
  }
  return ids;
}

TEST(PublicPipeline, AStateSavedMidEpochResumesExactlyTheRestInANewPipeline) {
  absl::StatusOr<Pipeline> whole = Pipeline::FromBuilder(Ids(103, 8));
  ASSERT_TRUE(whole.ok()) << whole.status();
  Iterator uninterrupted = whole->Iterate(2);
  const std::vector<int64_t> want = Drain(&uninterrupted, -1);

  absl::StatusOr<Pipeline> first = Pipeline::FromBuilder(Ids(103, 8));
  ASSERT_TRUE(first.ok());
  Iterator it = first->Iterate(2);
  std::vector<int64_t> got = Drain(&it, 5);
  absl::StatusOr<std::string> state = it.SaveState();
  ASSERT_TRUE(state.ok()) << state.status();

  absl::StatusOr<Pipeline> restarted = Pipeline::FromBuilder(Ids(103, 8));
  ASSERT_TRUE(restarted.ok());
  absl::StatusOr<Iterator> rest = restarted->Resume(*state);
  ASSERT_TRUE(rest.ok()) << rest.status();
  const std::vector<int64_t> after = Drain(&*rest, -1);
  got.insert(got.end(), after.begin(), after.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(want.size(), 103u);
}

TEST(PublicPipeline, AStateOfAnotherPipelineIsRefused) {
  absl::StatusOr<Pipeline> saving = Pipeline::FromBuilder(Ids(103, 8));
  ASSERT_TRUE(saving.ok());
  Iterator it = saving->Iterate(0);
  Drain(&it, 2);
  absl::StatusOr<std::string> state = it.SaveState();
  ASSERT_TRUE(state.ok());
  absl::StatusOr<Pipeline> other = Pipeline::FromBuilder(Ids(103, 9));
  ASSERT_TRUE(other.ok());
  EXPECT_THAT(other->Resume(*state).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fingerprint")));
  EXPECT_THAT(other->Resume("not a state").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a sluice iterator state")));
}

// A watchdog holding a moved-from iterator gets an error, not a crash.
TEST(PublicPipeline, AMovedFromIteratorSaysSo) {
  absl::StatusOr<Pipeline> p = Pipeline::FromBuilder(Ids(100, 8));
  ASSERT_TRUE(p.ok()) << p.status();
  Iterator first = p->Iterate(0);
  Iterator second = std::move(first);
  Batch b;
  bool end = false;
  EXPECT_THAT(first.Next(&b, &end),  // NOLINT(bugprone-use-after-move): what it tests
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("was moved from")));
  EXPECT_THAT(first.SaveState().status(), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("moved from")));
  first.Cancel();
  EXPECT_EQ(first.skipped(), 0);
  EXPECT_EQ(Drain(&second, -1).size(), 100u);
}

// Two threads in one iterator's Next corrupted the heap; a null argument
// crashed. The source is throttled to a byte a thousand seconds: whichever
// thread gets in first waits until cancelled, and the other is refused.
TEST(PublicPipeline, ASecondConsumerAtOnceOrANullArgumentIsRefused) {
  PipelineDef def = Ids(100, 8).Build();
  def.mutable_nodes(0)->mutable_source()->set_throttle_bytes_per_s(0.001);
  absl::StatusOr<Pipeline> p = Pipeline::FromJson(graph::PipelineToJson(def));
  ASSERT_TRUE(p.ok()) << p.status();
  Iterator it = p->Iterate(0);
  bool end = false;
  EXPECT_THAT(it.Next(nullptr, &end), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must not be null")));
  std::vector<absl::Status> got(2);
  std::atomic<int> returned{0};
  std::vector<std::thread> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.emplace_back([&, i] {
      Batch b;
      bool done = false;
      got[i] = it.Next(&b, &done);
      if (++returned == 1) it.Cancel();  // the refused one frees the waiting one
    });
  }
  for (std::thread& t : consumers) t.join();
  std::sort(got.begin(), got.end(), [](const absl::Status& a, const absl::Status& b) { return a.code() < b.code(); });
  EXPECT_EQ(got[0].code(), absl::StatusCode::kCancelled) << got[0];
  EXPECT_THAT(got[1], StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("called from two threads at once")));
}

// The builder sets the memory budget as the JSON's options do.
TEST(PublicPipeline, TheBuildersMemoryBudgetBoundsThePipeline) {
  EXPECT_THAT(Pipeline::FromBuilder(Ids(100, 8).MemoryBudget(16)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("memory_budget_bytes 16 is less than")));
  absl::StatusOr<Pipeline> p = Pipeline::FromBuilder(Ids(100, 8).MemoryBudget(int64_t{64} << 20));
  ASSERT_TRUE(p.ok()) << p.status();
  Iterator it = p->Iterate(0);
  EXPECT_EQ(Drain(&it, -1).size(), 100u);
}

}  // namespace
}  // namespace sluice
