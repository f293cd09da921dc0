#include "sluice/core/buffer_pool.h"

#include <new>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(BufferPool, ASizeBeyondEveryClassIsBadAllocNotAWildWrite) {
  BufferPool pool;
  EXPECT_THROW(pool.Allocate(size_t{1} << 60), std::bad_alloc);
  EXPECT_EQ(pool.stats().live_bytes, 0u);
}

TEST(BufferPool, ReusesReleasedBlocks) {
  BufferPool pool;
  uint8_t* first;
  {
    auto b = pool.Allocate(1000);
    first = b->data();
    EXPECT_GE(b->size(), 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  auto again = pool.Allocate(900);  // same size class
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(pool.stats().reuses, 1u);
}

TEST(BufferPool, CachesAtMostItsLimit) {
  BufferPool::Options options;
  options.max_cached_bytes = 4096;
  BufferPool pool(options);
  {
    auto a = pool.Allocate(4096);
    auto b = pool.Allocate(4096);
    EXPECT_EQ(pool.stats().live_bytes, 8192u);
  }
  EXPECT_EQ(pool.stats().live_bytes, 0u);
  EXPECT_EQ(pool.stats().cached_bytes, 4096u);  // the second went back to the system
  EXPECT_EQ(pool.stats().peak_live_bytes, 8192u);
}

TEST(BufferPool, SteadyStateAllocatesNothingNew) {
  BufferPool pool;
  for (int i = 0; i < 100; ++i) {
    auto a = pool.Allocate(1 << 20);
    auto b = pool.Allocate(3000);
  }
  EXPECT_EQ(pool.stats().allocations, 200u);
  EXPECT_EQ(pool.stats().reuses, 198u);
}

TEST(BufferPool, BigBlocksWasteAtMostAQuarterAndTheBlocksKeptStayCached) {
  BufferPool pool(BufferPool::Options{1 << 10});  // caches 1 KiB of its own accord
  const size_t batch = 154'140'672;               // a W3 batch: 256 x 3 x 224 x 224 float32
  pool.KeepCached(batch, 3);
  EXPECT_EQ(pool.stats().cached_bytes, 0u);  // nothing allocated before it is used
  std::vector<std::shared_ptr<Buffer>> held;
  for (int i = 0; i < 3; ++i) held.push_back(pool.Allocate(batch));
  EXPECT_EQ(pool.stats().live_bytes, 3 * size_t{167'772'160});  // 1.25 x 2^27, not 2^28
  held.clear();                                                 // all three go back to the cache, past its 1 KiB
  EXPECT_EQ(pool.stats().cached_bytes, 3 * size_t{167'772'160});
  for (int i = 0; i < 3; ++i) held.push_back(pool.Allocate(batch));
  EXPECT_EQ(pool.stats().reuses, 3u);
  held.clear();
  held.push_back(pool.Allocate(1 << 20));  // not reserved: cached only within the limit
  held.clear();
  EXPECT_EQ(pool.stats().cached_bytes, 3 * size_t{167'772'160});
}

TEST(BufferPool, HoldsAtMostItsLimitInUseAndCachedTogether) {
  BufferPool::Options options;
  options.max_held_bytes = 3 << 20;
  BufferPool pool(options);
  std::vector<std::shared_ptr<Buffer>> held;
  for (int i = 0; i < 2; ++i) held.push_back(pool.Allocate(1 << 20));
  held.clear();
  EXPECT_EQ(pool.stats().cached_bytes, size_t{2} << 20);
  // A block of another size: the cache gives up what the limit has no room
  // for before a new block is used.
  auto big = pool.Allocate(2 << 20);
  EXPECT_EQ(pool.stats().live_bytes, size_t{2} << 20);
  EXPECT_EQ(pool.stats().cached_bytes, size_t{1} << 20);
  EXPECT_LE(pool.stats().peak_held_bytes, size_t{3} << 20);
  // Released while another is in use: cached only within the limit.
  auto small = pool.Allocate(1 << 20);
  auto other = pool.Allocate(1 << 20);
  small.reset();
  EXPECT_EQ(pool.stats().live_bytes, size_t{3} << 20);
  EXPECT_EQ(pool.stats().cached_bytes, 0u);  // no room left beside the 3 MiB in use
}

TEST(BufferPool, BuffersOutliveTheirPool) {
  std::shared_ptr<Buffer> kept;
  {
    BufferPool pool;
    kept = pool.Allocate(1 << 16);
    pool.Allocate(1 << 16).reset();
    EXPECT_EQ(pool.stats().cached_bytes, size_t{1} << 16);
  }  // the cached block goes now; the one kept, when released
  kept->data()[0] = 7;  // still ours; freed when released (ASan would say otherwise)
  EXPECT_EQ(kept->data()[0], 7);
  kept.reset();
}

TEST(BufferPool, TrimToKeepsTheSmallestBlocksWithinWhatItIsTold) {
  BufferPool pool;
  {
    auto a = pool.Allocate(1 << 20);
    auto b = pool.Allocate(4096);
    auto c = pool.Allocate(4096);
  }
  pool.TrimTo(10000);
  EXPECT_EQ(pool.stats().cached_bytes, 8192u);  // the 1 MiB block went first
  pool.Trim();
  EXPECT_EQ(pool.stats().cached_bytes, 0u);
}

class CountingObserver : public BufferPool::Observer {
 public:
  void OnRelease() override { ++releases; }
  int releases = 0;
};

TEST(BufferPool, TellsItsObserversOfEachReleaseUntilRemoved) {
  BufferPool pool;
  CountingObserver observer;
  pool.AddObserver(&observer);
  pool.Allocate(100).reset();
  pool.Allocate(100).reset();
  pool.RemoveObserver(&observer);
  pool.Allocate(100).reset();
  EXPECT_EQ(observer.releases, 2);
}

}  // namespace
}  // namespace sluice
