// Splits read ahead on several threads come out whole and in order; an
// error comes at its split's turn; never more splits held than threads,
// nor than the memory budget has room for, but the one the consumer waits
// for.
#include "sluice/exec/split_read_ahead.h"

#include <atomic>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/exec/exec_context.h"
#include "status_matchers.h"

namespace sluice::exec {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

// Split s read as s + 1 one-row chunks of rows = s.
absl::Status ReadRows(size_t split, std::vector<Batch>* chunks) {
  for (size_t i = 0; i <= split; ++i) {
    Batch b;
    b.rows = static_cast<int64_t>(split);
    chunks->push_back(std::move(b));
  }
  return absl::OkStatus();
}

constexpr int64_t kMib = int64_t{1} << 20;

// A split of one chunk of a MiB from `pool`.
absl::Status ReadMib(BufferPool* pool, std::vector<Batch>* chunks) {
  Batch b;
  b.rows = 1;
  b.columns.push_back(Column{Tensor::Allocate(DType::kUInt8, Shape({1, kMib}), pool), Tensor()});
  chunks->push_back(std::move(b));
  return absl::OkStatus();
}

// Reads splits of a MiB from `pool`, counting the reads started; destroys
// the read-ahead once `n` have started (its readers stop) and returns how
// many had started by then.
int StartedBeforeStopping(int threads, BufferPool* pool, MemoryBudget* budget, std::atomic<int64_t>* split_bytes,
                          int n) {
  absl::Mutex mu;
  int started = 0;
  {
    SplitReadAhead ahead(
        20, threads,
        [&](size_t, const std::atomic<bool>&, std::vector<Batch>* c) {
          {
            absl::MutexLock lock(&mu);
            ++started;
          }
          return ReadMib(pool, c);
        },
        budget, split_bytes);
    std::pair<int*, int> wait(&started, n);
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](std::pair<int*, int>* a) { return *a->first >= a->second; }, &wait));
  }
  return started;
}

TEST(SplitReadAhead, SplitsComeOutWholeInTheirOrderWhateverTheThreads) {
  for (int threads : {1, 2, 4}) {
    SplitReadAhead ahead(6, threads,
                         [](size_t s, const std::atomic<bool>&, std::vector<Batch>* c) { return ReadRows(s, c); });
    for (size_t s = 0; s < 6; ++s) {
      std::vector<Batch> chunks;
      ASSERT_OK_AND_ASSIGN(bool more, ahead.Next(&chunks));
      ASSERT_TRUE(more);
      ASSERT_EQ(chunks.size(), s + 1) << threads << " threads";
      EXPECT_EQ(chunks[0].rows, static_cast<int64_t>(s));
    }
    std::vector<Batch> none;
    ASSERT_OK_AND_ASSIGN(bool more, ahead.Next(&none));
    EXPECT_FALSE(more);
  }
}

TEST(SplitReadAhead, AnErrorComesAtItsSplitsTurnAfterTheSplitsBeforeIt) {
  SplitReadAhead ahead(4, 3, [](size_t s, const std::atomic<bool>&, std::vector<Batch>* c) {
    return s == 2 ? absl::DataLossError("split 2 is damaged") : ReadRows(s, c);
  });
  std::vector<Batch> chunks;
  ASSERT_OK_AND_ASSIGN(bool first, ahead.Next(&chunks));
  ASSERT_OK_AND_ASSIGN(bool second, ahead.Next(&chunks));
  EXPECT_TRUE(first && second);
  EXPECT_THAT(ahead.Next(&chunks).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("split 2")));
}

TEST(SplitReadAhead, NoMoreSplitsAreReadOrHeldAheadThanThreads) {
  absl::Mutex mu;
  int started = 0;
  {
    SplitReadAhead ahead(20, 2, [&](size_t s, const std::atomic<bool>&, std::vector<Batch>* c) {
      absl::MutexLock lock(&mu);
      ++started;
      return ReadRows(s, c);
    });
    // Nothing taken yet: the readers stop once two splits are read ahead.
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n >= 2; }, &started));
  }
  EXPECT_EQ(started, 2);  // splits 0 and 1: none taken, so the window never moved
}

TEST(SplitReadAhead, SplitsReadAheadWaitForRoomInTheMemoryBudget) {
  BufferPool pool;
  Cancellation cancel;
  MemoryBudget budget(3 * kMib + kMib / 2, &pool, &cancel);
  std::atomic<int64_t> split_bytes{kMib};  // known from an epoch before
  // Eight readers, but room for three splits of a MiB: the fourth waits.
  EXPECT_EQ(StartedBeforeStopping(8, &pool, &budget, &split_bytes, 3), 3);
  EXPECT_LE(pool.stats().peak_live_bytes, static_cast<size_t>(3 * kMib));
}

TEST(SplitReadAhead, TheSplitTheConsumerAwaitsIsReadWhateverTheBudget) {
  BufferPool pool;
  Cancellation cancel;
  MemoryBudget budget(kMib / 2, &pool, &cancel);  // not even one split fits
  std::atomic<int64_t> split_bytes{kMib};
  SplitReadAhead ahead(
      40, 4, [&](size_t, const std::atomic<bool>&, std::vector<Batch>* c) { return ReadMib(&pool, c); }, &budget,
      &split_bytes);
  std::vector<Batch> held;  // the consumer keeps the last split it took
  for (int s = 0; s < 40; ++s) {
    std::vector<Batch> chunks;
    ASSERT_OK_AND_ASSIGN(bool more, ahead.Next(&chunks));
    ASSERT_TRUE(more);
    held = std::move(chunks);
  }
  // At most the split held and the one awaited: the next is not read while
  // the consumer works on one (that held three splits at a budget under one).
  EXPECT_LE(pool.stats().peak_live_bytes, static_cast<size_t>(2 * kMib));
}

TEST(SplitReadAhead, PastTheBudgetOnlyTheSplitTheConsumerWaitsForIsRead) {
  BufferPool pool;
  Cancellation cancel;
  MemoryBudget budget(kMib / 2, &pool, &cancel);
  std::atomic<int64_t> split_bytes{0};
  Tensor full = Tensor::Allocate(DType::kUInt8, Shape({kMib}), &pool);  // the pool is already past the budget
  std::atomic<int> started{0};
  SplitReadAhead ahead(
      6, 4,
      [&](size_t, const std::atomic<bool>&, std::vector<Batch>* c) {
        ++started;
        return ReadMib(&pool, c);
      },
      &budget, &split_bytes);
  std::vector<Batch> chunks;
  ASSERT_OK_AND_ASSIGN(bool more, ahead.Next(&chunks));  // read while the consumer waits for it
  ASSERT_TRUE(more);
  EXPECT_EQ(split_bytes.load(), kMib);  // what the next epoch's read-ahead starts from
  chunks.clear();
  ASSERT_OK_AND_ASSIGN(more, ahead.Next(&chunks));
  ASSERT_TRUE(more);
  EXPECT_LE(started.load(), 3);  // splits 0 and 1, and 2 at most, waiting for room
  EXPECT_LE(pool.stats().peak_live_bytes, static_cast<size_t>(2 * kMib));  // `full` and one split
}

TEST(SplitReadAhead, AReaderWaitingForRoomHearsTheCancellation) {
  BufferPool pool;
  Cancellation cancel;
  MemoryBudget budget(kMib / 2, &pool, &cancel);
  std::atomic<int64_t> split_bytes{kMib};
  SplitReadAhead ahead(
      6, 2, [&](size_t, const std::atomic<bool>&, std::vector<Batch>* c) { return ReadMib(&pool, c); }, &budget,
      &split_bytes);
  std::vector<Batch> first;
  ASSERT_OK_AND_ASSIGN(bool more, ahead.Next(&first));  // split 2's reader now waits for room
  ASSERT_TRUE(more);
  cancel.Cancel();
  // The splits after hand on the cancellation, at the latest split 2 (its
  // reader was waiting), instead of each being read when its turn comes.
  absl::Status status;
  for (int s = 1; s < 6 && status.ok(); ++s) {
    std::vector<Batch> chunks;
    status = ahead.Next(&chunks).status();
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled, ::testing::_));
}

}  // namespace
}  // namespace sluice::exec
