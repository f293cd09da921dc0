#include "sluice/exec/exec_context.h"

#include <atomic>
#include <optional>
#include <thread>

#include "gtest/gtest.h"

namespace sluice::exec {
namespace {

// A token lent while its thread waits elsewhere is another thread's to
// compute with; taking it back waits until that one is done.
TEST(CpuTokenTest, ALentTokenLetsAnotherThreadComputeAndComesBackAfterIt) {
  Cancellation cancel;
  CpuBudget budget(1, &cancel);
  CpuToken waiting(&budget);
  ASSERT_TRUE(waiting.held());
  waiting.Lend();
  EXPECT_FALSE(waiting.held());
  std::atomic<bool> computing_done{false};
  std::optional<CpuToken> other(&budget);  // would wait forever had the token not been lent
  ASSERT_TRUE(other->held());
  std::thread reclaim([&] {
    EXPECT_TRUE(waiting.Reclaim());
    EXPECT_TRUE(computing_done.load());  // only once `other` gave it back
  });
  computing_done = true;
  other.reset();
  reclaim.join();
  EXPECT_TRUE(waiting.held());
}

TEST(CpuTokenTest, ReclaimingIsRefusedOnceTheRunIsCancelled) {
  Cancellation cancel;
  CpuBudget budget(1, &cancel);
  CpuToken waiting(&budget);
  waiting.Lend();
  CpuToken other(&budget);
  cancel.Cancel();
  EXPECT_FALSE(waiting.Reclaim());
  EXPECT_FALSE(waiting.held());
}

}  // namespace
}  // namespace sluice::exec
