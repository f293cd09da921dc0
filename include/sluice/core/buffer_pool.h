// Pooled, aligned memory blocks for tensors.
#ifndef SLUICE_CORE_BUFFER_POOL_H_
#define SLUICE_CORE_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>

namespace sluice {

class BufferPool;

// Where a buffer's bytes are: pageable host memory (the pool's), page-locked
// host memory (fast, asynchronous copies to a GPU), or a GPU's memory (not
// readable from the host).
enum class MemoryKind { kHost, kPinnedHost, kDevice };

const char* MemoryKindName(MemoryKind kind);

// A block of at least size() bytes. Reference-counted through
// std::shared_ptr; the last reference returns a pool's block (64-byte
// aligned) to its pool, or releases the owner of adopted memory.
class Buffer {
 public:
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  MemoryKind memory_kind() const { return kind_; }
  // The GPU holding a kDevice buffer; -1 for host memory.
  int device() const { return device_; }
  // What keeps adopted memory alive (null for a pool's block): a device
  // runtime keeps its per-allocation state there.
  const std::shared_ptr<void>& owner() const { return owner_; }
  // Adopted memory that must not be written (a file mapped read-only):
  // what a pipeline hands its consumer is copied out of it first.
  bool read_only() const { return read_only_; }

  // Memory owned elsewhere (a received message, a device allocation), kept
  // alive by `owner`, so tensors can view it without a copy. Aligned only as
  // the owner made it: kernels load unaligned.
  static std::shared_ptr<Buffer> Adopt(uint8_t* data, size_t size, std::shared_ptr<void> owner,
                                       MemoryKind kind = MemoryKind::kHost, int device = -1) {
    auto* buffer = new Buffer(data, size, -1, kind, device);
    buffer->owner_ = std::move(owner);
    return std::shared_ptr<Buffer>(buffer);
  }
  static std::shared_ptr<Buffer> AdoptReadOnly(const uint8_t* data, size_t size, std::shared_ptr<void> owner) {
    std::shared_ptr<Buffer> buffer = Adopt(const_cast<uint8_t*>(data), size, std::move(owner));
    buffer->read_only_ = true;
    return buffer;
  }

 private:
  friend class BufferPool;
  Buffer(uint8_t* data, size_t size, int size_class, MemoryKind kind = MemoryKind::kHost, int device = -1)
      : data_(data), size_(size), size_class_(size_class), kind_(kind), device_(device) {}
  uint8_t* data_;
  size_t size_;
  int size_class_;
  MemoryKind kind_;
  int device_;
  std::shared_ptr<void> owner_;
  bool read_only_ = false;
};

// Hands out Buffers from free lists of power-of-two size classes, so a
// pipeline in steady state allocates nothing from the heap. The free lists
// hold at most Options::max_cached_bytes, and with Options::max_held_bytes
// set, at most what keeps the blocks in use plus those cached under it;
// beyond that blocks go back to the system, which keeps RSS bounded.
//
// Thread-safe. One lock per Allocate/release: callers allocate per chunk or
// batch, never per sample. Buffers may outlive their pool: the last one
// frees what the pool still held.
class BufferPool {
 public:
  struct Options {
    // Bytes kept in free lists for reuse.
    size_t max_cached_bytes = size_t{512} << 20;
    // When > 0: a released block is cached only while the blocks in use and
    // cached stay within this (a pipeline's memory budget).
    size_t max_held_bytes = 0;
    // Where blocks come from: by default aligned pageable memory; a device
    // runtime's staging pool supplies page-locked memory (cudaHostAlloc).
    // `allocate` returns null when it cannot.
    void* (*allocate)(size_t bytes) = nullptr;
    void (*release)(void* data) = nullptr;
    MemoryKind kind = MemoryKind::kHost;
  };
  struct Stats {
    size_t live_bytes = 0;       // in Buffers held by users
    size_t peak_live_bytes = 0;  // high-water mark of live_bytes
    size_t cached_bytes = 0;     // in free lists
    size_t peak_held_bytes = 0;  // high-water mark of live_bytes + cached_bytes
    uint64_t allocations = 0;    // Allocate calls
    uint64_t reuses = 0;         // Allocate calls served from a free list
  };
  // Told each time a block goes back to the pool, after the pool's lock is
  // released (a memory budget waits for room). Must be removed before it
  // is destroyed.
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void OnRelease() = 0;
  };

  BufferPool() : BufferPool(Options()) {}
  explicit BufferPool(Options options);
  // Frees the cached blocks now; blocks still in use are freed when
  // released.
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // The process-wide pool; never destroyed.
  static BufferPool* Default();

  // A buffer of at least `bytes` bytes (contents undefined).
  std::shared_ptr<Buffer> Allocate(size_t bytes);
  // What a buffer of `bytes` bytes holds of a pool: its block, `bytes`
  // rounded up to a size class. Stats count blocks, and so do budgets.
  static size_t BlockBytes(size_t bytes);
  // The memory its blocks are.
  MemoryKind kind() const;

  // Lets the cache keep up to `count` blocks that fit `bytes` on top of
  // max_cached_bytes (the largest count per size), so a pipeline's working
  // set, once its first epoch has used it, is reused rather than freed and
  // faulted in again. Allocates nothing: pages are touched as the pipeline
  // first writes them, not when it is created, and what the pool reports
  // holding is memory that was used.
  void KeepCached(size_t bytes, int count);

  Stats stats() const;
  // Ends a window of the pool's use (an epoch), starts the next from what
  // is in use now, and returns the most in use at once over the last
  // `windows` windows.
  size_t EndPeakWindow(int windows);
  // Returns cached blocks to the system, the largest first, until at most
  // `keep_bytes` stay cached.
  void TrimTo(size_t keep_bytes);
  void Trim() { TrimTo(0); }
  // Replaces Options::max_held_bytes (a budget less what its pipeline now
  // holds beside the pool); cached blocks over it go back at once.
  void LimitHeld(size_t bytes);

  void AddObserver(Observer* observer);
  void RemoveObserver(Observer* observer);

 private:
  // The free lists, counters and observers (buffer_pool.cc), shared with
  // the buffers handed out so that they may outlive the pool.
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace sluice

#endif  // SLUICE_CORE_BUFFER_POOL_H_
