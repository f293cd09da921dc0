// Splits read ahead on several threads come out whole and in order; an
// error comes at its split's turn; never more splits held than threads.
#include "sluice/exec/split_read_ahead.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace sluice::exec
