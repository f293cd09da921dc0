#include "sluice/core/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sluice {

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost:
      return "host";
    case MemoryKind::kPinnedHost:
      return "pinned host";
    case MemoryKind::kDevice:
      return "device";
  }
  return "?";
}
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr int kMinClassLog2 = 8;      // 256 bytes
constexpr int kQuarterFromLog2 = 16;  // 64 KiB
constexpr int kPowerClasses = kQuarterFromLog2 - kMinClassLog2 + 1;

// Powers of two up to 64 KiB, then four classes per power of two (1.25x,
// 1.5x, 1.75x, 2x), so a big block wastes at most a fifth: a W3 batch of
// 154 MB took a 256 MB block, and the cache held two of them.
int SizeClass(size_t bytes) {
  if (bytes <= (size_t{1} << kQuarterFromLog2)) {
    int log2 = kMinClassLog2;
    while ((size_t{1} << log2) < bytes) ++log2;
    return log2 - kMinClassLog2;
  }
  int log2 = kQuarterFromLog2;
  while ((size_t{1} << (log2 + 1)) < bytes) ++log2;
  const size_t base = size_t{1} << log2;
  int quarter = 1;
  while (base + (base >> 2) * quarter < bytes) ++quarter;
  return kPowerClasses + (log2 - kQuarterFromLog2) * 4 + (quarter - 1);
}

size_t ClassBytes(int size_class) {
  if (size_class < kPowerClasses) return size_t{1} << (size_class + kMinClassLog2);
  const int log2 = (size_class - kPowerClasses) / 4 + kQuarterFromLog2;
  const size_t base = size_t{1} << log2;
  return base + (base >> 2) * ((size_class - kPowerClasses) % 4 + 1);
}

// 9 powers of two (256 B .. 64 KiB), then 4 per power of two up to 2^48.
constexpr int kNumClasses = kPowerClasses + 32 * 4;

}  // namespace

struct BufferPool::State {
  absl::Mutex mu;
  std::vector<uint8_t*> free[kNumClasses] ABSL_GUARDED_BY(mu);
  size_t reserved_by_class[kNumClasses] ABSL_GUARDED_BY(mu) = {};
  size_t reserved_bytes ABSL_GUARDED_BY(mu) = 0;
  Stats stats ABSL_GUARDED_BY(mu);
};

BufferPool::BufferPool(Options options) : options_(options), state_(std::make_unique<State>()) {}

BufferPool::~BufferPool() { Trim(); }

BufferPool* BufferPool::Default() {
  static BufferPool* pool = new BufferPool();
  return pool;
}

std::shared_ptr<Buffer> BufferPool::Allocate(size_t bytes) {
  // Beyond the largest class no system could serve it either; inputs are
  // checked long before (a size from a file or the wire never gets here).
  if (bytes > ClassBytes(kNumClasses - 1)) throw std::bad_alloc();
  const int size_class = SizeClass(std::max<size_t>(bytes, 1));
  const size_t capacity = ClassBytes(size_class);
  uint8_t* data = nullptr;
  {
    absl::MutexLock lock(&state_->mu);
    ++state_->stats.allocations;
    std::vector<uint8_t*>& list = state_->free[size_class];
    if (!list.empty()) {
      data = list.back();
      list.pop_back();
      state_->stats.cached_bytes -= capacity;
      ++state_->stats.reuses;
    }
    state_->stats.live_bytes += capacity;
    state_->stats.peak_live_bytes = std::max(state_->stats.peak_live_bytes, state_->stats.live_bytes);
  }
  if (data == nullptr) data = AllocateBlock(capacity);
  Buffer* buffer = new Buffer(data, bytes, size_class, options_.kind);
  return std::shared_ptr<Buffer>(buffer, [this](Buffer* b) { Release(b); });
}

uint8_t* BufferPool::AllocateBlock(size_t capacity) const {
  if (options_.allocate != nullptr) {
    void* memory = options_.allocate(capacity);
    if (memory == nullptr) throw std::bad_alloc();
    return static_cast<uint8_t*>(memory);
  }
  // Batch-sized buffers (a W3 batch is 154 MB) on 4 KiB pages cost one page
  // fault per page on first touch; asking for transparent huge pages cut
  // the faults of `sluice-bench w3` from 543k to 238k at the same RSS.
  // posix_memalign, not aligned_alloc: a size class need not be a multiple
  // of the huge page (aligned_alloc requires it; ASan's fuzzing found it).
  const bool huge = capacity >= kHugePageBytes * 2;
  void* memory = nullptr;
  if (posix_memalign(&memory, huge ? kHugePageBytes : kAlignment, capacity) != 0) throw std::bad_alloc();
  if (huge) madvise(memory, capacity, MADV_HUGEPAGE);
  return static_cast<uint8_t*>(memory);
}

void BufferPool::FreeBlock(uint8_t* data) const {
  if (options_.release != nullptr) {
    options_.release(data);
  } else {
    std::free(data);
  }
}

void BufferPool::Release(Buffer* buffer) {
  uint8_t* data = buffer->data_;
  const int size_class = buffer->size_class_;
  const size_t capacity = ClassBytes(size_class);
  delete buffer;
  {
    absl::MutexLock lock(&state_->mu);
    state_->stats.live_bytes -= capacity;
    if (state_->stats.cached_bytes + capacity <= options_.max_cached_bytes + state_->reserved_bytes) {
      state_->free[size_class].push_back(data);
      state_->stats.cached_bytes += capacity;
      return;
    }
  }
  FreeBlock(data);
}

void BufferPool::KeepCached(size_t bytes, int count) {
  const int size_class = SizeClass(std::max<size_t>(bytes, 1));
  absl::MutexLock lock(&state_->mu);
  const size_t wanted = ClassBytes(size_class) * static_cast<size_t>(count);
  if (wanted > state_->reserved_by_class[size_class]) {
    state_->reserved_bytes += wanted - state_->reserved_by_class[size_class];
    state_->reserved_by_class[size_class] = wanted;
  }
}

BufferPool::Stats BufferPool::stats() const {
  absl::MutexLock lock(&state_->mu);
  return state_->stats;
}

void BufferPool::Trim() {
  absl::MutexLock lock(&state_->mu);
  for (auto& list : state_->free) {
    for (uint8_t* data : list) FreeBlock(data);
    list.clear();
  }
  state_->stats.cached_bytes = 0;
}

}  // namespace sluice
