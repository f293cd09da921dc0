#include "sluice/core/heap_reuse.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

constexpr size_t kBlock = 1 << 20;

// Holds `count` blocks at once, then gives them all back: one epoch whose
// peak in use is `count` blocks.
void RunEpochHolding(BufferPool* pool, int count) {
  std::vector<std::shared_ptr<Buffer>> held;
  for (int i = 0; i < count; ++i) held.push_back(pool->Allocate(kBlock));
}

TEST(GiveBackUnused, KeepsWhatTheEpochHadInUseAtOnce) {
  BufferPool pool(BufferPool::Options{8 * kBlock});
  RunEpochHolding(&pool, 3);
  GiveBackUnused(&pool);
  EXPECT_EQ(pool.stats().cached_bytes, 3 * kBlock);
}

TEST(GiveBackUnused, ABlockMoreThatOneEpochNeededGoesBackWhenEightEpochsDidWithoutIt) {
  BufferPool pool(BufferPool::Options{8 * kBlock});
  RunEpochHolding(&pool, 3);
  GiveBackUnused(&pool);
  RunEpochHolding(&pool, 4);  // a stalled consumer let one more fill
  GiveBackUnused(&pool);
  EXPECT_EQ(pool.stats().cached_bytes, 4 * kBlock);
  for (int epoch = 1; epoch < 8; ++epoch) {
    RunEpochHolding(&pool, 3);
    GiveBackUnused(&pool);
    EXPECT_EQ(pool.stats().cached_bytes, 4 * kBlock) << "after " << epoch << " epoch(s) of 3";
  }
  RunEpochHolding(&pool, 3);
  GiveBackUnused(&pool);
  EXPECT_EQ(pool.stats().cached_bytes, 3 * kBlock);
  EXPECT_EQ(pool.stats().peak_live_bytes, 4 * kBlock);  // still reported
}

TEST(GiveBackUnused, CountsTheBlocksStillHeldAtTheEnd) {
  BufferPool pool(BufferPool::Options{8 * kBlock});
  std::shared_ptr<Buffer> last;  // a training loop's last batch, kept past the end
  {
    std::vector<std::shared_ptr<Buffer>> held;
    for (int i = 0; i < 3; ++i) held.push_back(pool.Allocate(kBlock));
    last = held.back();
  }
  GiveBackUnused(&pool);
  EXPECT_EQ(pool.stats().cached_bytes, 2 * kBlock);
  EXPECT_EQ(pool.stats().live_bytes, kBlock);
}

}  // namespace
}  // namespace sluice
