#include "sluice/core/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
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
constexpr size_t kMappedFromBytes = size_t{128} << 10;
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

// A cached block on its way back to the system.
struct Block {
  uint8_t* data;
  size_t capacity;
};

}  // namespace

struct BufferPool::State {
  explicit State(const Options& options) : options(options), max_held(options.max_held_bytes) {}
  ~State() { TrimTo(0); }

  uint8_t* AllocateBlock(size_t capacity) const;
  void FreeBlock(uint8_t* data, size_t capacity) const;
  // A block back from a buffer: cached within the limits, else freed.
  void Release(uint8_t* data, int size_class);
  void TrimTo(size_t keep_bytes);
  void LimitHeld(size_t bytes);
  // Takes cached blocks, the largest first, until the blocks in use and
  // cached fit max_held again (a new block is about to be used);
  // the caller frees them outside the lock.
  std::vector<Block> EvictOverLimit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Takes cached blocks, the largest first, until at most `keep_bytes` stay.
  std::vector<Block> TakeCachedOver(size_t keep_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  const Options options;
  absl::Mutex mu;
  size_t max_held ABSL_GUARDED_BY(mu);  // options.max_held_bytes, or what LimitHeld set
  std::vector<uint8_t*> free[kNumClasses] ABSL_GUARDED_BY(mu);
  size_t reserved_by_class[kNumClasses] ABSL_GUARDED_BY(mu) = {};
  size_t reserved_bytes ABSL_GUARDED_BY(mu) = 0;
  // Set when the pool is destroyed: blocks released later are freed.
  bool closed ABSL_GUARDED_BY(mu) = false;
  Stats stats ABSL_GUARDED_BY(mu);
  // High-water mark of stats.live_bytes since the last EndPeakWindow, and
  // those of the windows before it, the latest last.
  size_t window_peak ABSL_GUARDED_BY(mu) = 0;
  std::deque<size_t> window_peaks ABSL_GUARDED_BY(mu);
  // Held while observers are told, so one is never told after its removal.
  absl::Mutex observers_mu;
  std::vector<Observer*> observers ABSL_GUARDED_BY(observers_mu);
};

BufferPool::BufferPool(Options options) : state_(std::make_shared<State>(options)) {}

BufferPool::~BufferPool() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->closed = true;
  }
  state_->TrimTo(0);  // now, not when the last buffer still held goes
}

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
  std::vector<Block> evicted;
  {
    absl::MutexLock lock(&state_->mu);
    Stats& stats = state_->stats;
    ++stats.allocations;
    std::vector<uint8_t*>& list = state_->free[size_class];
    if (!list.empty()) {
      data = list.back();
      list.pop_back();
      stats.cached_bytes -= capacity;
      ++stats.reuses;
    }
    stats.live_bytes += capacity;
    if (data == nullptr) evicted = state_->EvictOverLimit();
    stats.peak_live_bytes = std::max(stats.peak_live_bytes, stats.live_bytes);
    state_->window_peak = std::max(state_->window_peak, stats.live_bytes);
    stats.peak_held_bytes = std::max(stats.peak_held_bytes, stats.live_bytes + stats.cached_bytes);
  }
  for (const Block& block : evicted) state_->FreeBlock(block.data, block.capacity);
  if (data == nullptr) data = state_->AllocateBlock(capacity);
  Buffer* buffer = new Buffer(data, bytes, size_class, state_->options.kind);
  return std::shared_ptr<Buffer>(buffer, [state = state_](Buffer* b) {
    uint8_t* block = b->data_;
    const int block_class = b->size_class_;
    delete b;
    state->Release(block, block_class);
  });
}

size_t BufferPool::BlockBytes(size_t bytes) { return ClassBytes(SizeClass(std::max<size_t>(bytes, 1))); }

MemoryKind BufferPool::kind() const { return state_->options.kind; }

uint8_t* BufferPool::State::AllocateBlock(size_t capacity) const {
  if (options.allocate != nullptr) {
    void* memory = options.allocate(capacity);
    if (memory == nullptr) throw std::bad_alloc();
    return static_cast<uint8_t*>(memory);
  }
  if (capacity < kMappedFromBytes) {
    void* memory = nullptr;
    if (posix_memalign(&memory, kAlignment, capacity) != 0) throw std::bad_alloc();
    return static_cast<uint8_t*>(memory);
  }
  // Blocks of 128 KiB and more are mapped, not taken from the heap:
  // freeing one returns its pages at once, where the heap (its trim
  // threshold raised for gRPC's and libjpeg's buffers, heap_reuse.h) kept
  // them and fragmented across the threads' arenas: W2 under a 64 MiB
  // budget grew to 184 MB of RSS over three epochs with 66 MB held, and
  // CIFAR chunks of 512 KiB under 14 MiB grew 45 MB over 20 epochs. Batch-sized blocks (a W3 batch is 154 MB) on
  // 4 KiB pages cost one fault per page on first touch; transparent huge
  // pages, on a range aligned to them, cut `sluice-bench w3`'s faults
  // from 543k to 238k.
  const bool huge = capacity >= kHugePageBytes * 2;
  const size_t slack = huge ? kHugePageBytes : 0;
  void* mapped = mmap(nullptr, capacity + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  auto* start = static_cast<uint8_t*>(mapped);
  if (huge) {
    auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(start) + slack - 1) & ~(slack - 1));
    if (aligned > start) munmap(start, aligned - start);
    if (aligned + capacity < start + capacity + slack) munmap(aligned + capacity, start + slack - aligned);
    madvise(aligned, capacity, MADV_HUGEPAGE);
    start = aligned;
  }
  return start;
}

void BufferPool::State::FreeBlock(uint8_t* data, size_t capacity) const {
  if (options.release != nullptr) {
    options.release(data);
  } else if (capacity < kMappedFromBytes) {
    std::free(data);
  } else {
    munmap(data, capacity);
  }
}

void BufferPool::State::Release(uint8_t* data, int size_class) {
  const size_t capacity = ClassBytes(size_class);
  bool cached = false;
  {
    absl::MutexLock lock(&mu);
    stats.live_bytes -= capacity;
    const bool within_cache = stats.cached_bytes + capacity <= options.max_cached_bytes + reserved_bytes;
    const bool within_held = max_held == 0 || stats.live_bytes + stats.cached_bytes + capacity <= max_held;
    if (!closed && within_cache && within_held) {
      free[size_class].push_back(data);
      stats.cached_bytes += capacity;
      cached = true;
    }
  }
  if (!cached) FreeBlock(data, capacity);
  absl::MutexLock lock(&observers_mu);
  for (Observer* observer : observers) observer->OnRelease();
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

size_t BufferPool::EndPeakWindow(int windows) {
  absl::MutexLock lock(&state_->mu);
  std::deque<size_t>& peaks = state_->window_peaks;
  peaks.push_back(state_->window_peak);
  while (peaks.size() > static_cast<size_t>(std::max(windows, 1))) peaks.pop_front();
  state_->window_peak = state_->stats.live_bytes;
  return *std::max_element(peaks.begin(), peaks.end());
}

void BufferPool::TrimTo(size_t keep_bytes) { state_->TrimTo(keep_bytes); }

void BufferPool::State::TrimTo(size_t keep_bytes) {
  std::vector<Block> freed;
  {
    absl::MutexLock lock(&mu);
    freed = TakeCachedOver(keep_bytes);
  }
  for (const Block& block : freed) FreeBlock(block.data, block.capacity);
}

void BufferPool::LimitHeld(size_t bytes) { state_->LimitHeld(bytes); }

void BufferPool::State::LimitHeld(size_t bytes) {
  std::vector<Block> freed;
  {
    absl::MutexLock lock(&mu);
    if (max_held == bytes) return;
    max_held = bytes;
    freed = EvictOverLimit();
  }
  for (const Block& block : freed) FreeBlock(block.data, block.capacity);
}

std::vector<Block> BufferPool::State::EvictOverLimit() {
  if (max_held == 0 || stats.live_bytes + stats.cached_bytes <= max_held) return {};
  const size_t room = max_held > stats.live_bytes ? max_held - stats.live_bytes : 0;
  return TakeCachedOver(room);
}

std::vector<Block> BufferPool::State::TakeCachedOver(size_t keep_bytes) {
  std::vector<Block> taken;
  for (int c = kNumClasses - 1; c >= 0 && stats.cached_bytes > keep_bytes; --c) {
    while (!free[c].empty() && stats.cached_bytes > keep_bytes) {
      taken.push_back(Block{free[c].back(), ClassBytes(c)});
      free[c].pop_back();
      stats.cached_bytes -= ClassBytes(c);
    }
  }
  return taken;
}

void BufferPool::AddObserver(Observer* observer) {
  absl::MutexLock lock(&state_->observers_mu);
  state_->observers.push_back(observer);
}

void BufferPool::RemoveObserver(Observer* observer) {
  absl::MutexLock lock(&state_->observers_mu);
  std::vector<Observer*>& list = state_->observers;
  list.erase(std::remove(list.begin(), list.end(), observer), list.end());
}

}  // namespace sluice
