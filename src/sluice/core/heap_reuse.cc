#include "sluice/core/heap_reuse.h"

#include <malloc.h>

#include <mutex>

namespace sluice {

void ReuseFreedHeapMemory() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
  });
#endif
}

void GiveBackUnused(BufferPool* pool) {
  // Not only the last epoch's peak: W1's varies by a 28 MiB batch from one
  // epoch to the next, and giving it back each time faulted it in again
  // (7% of W1's rate).
  constexpr int kEpochsRemembered = 8;
  const size_t peak = pool->EndPeakWindow(kEpochsRemembered);
  const BufferPool::Stats stats = pool->stats();
  const size_t keep = peak > stats.live_bytes ? peak - stats.live_bytes : 0;
  if (stats.cached_bytes <= keep) return;
  pool->TrimTo(keep);
  GiveBackFreedHeap();
}

void GiveBackFreedHeap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace sluice
