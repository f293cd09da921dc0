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
  const BufferPool::Stats stats = pool->stats();
  const size_t keep = stats.peak_live_bytes - stats.live_bytes;
  if (stats.cached_bytes <= keep) return;
  pool->TrimTo(keep);
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace sluice
