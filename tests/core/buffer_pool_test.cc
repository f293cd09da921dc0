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

}  // namespace
}  // namespace sluice
