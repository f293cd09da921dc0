// Where Parquet row groups and Arrow IPC record batches are decoded: an
// Arrow memory pool whose large buffers are pages mapped for them, and
// counted.
//
// Why not the C library's heap or Arrow's default (mimalloc): a row group
// grows its buffers by doubling, and the heap kept the freed steps of every
// size, so a pipeline holding one 12 MiB row group had 60 MiB of RSS that
// nothing reported. A mapped buffer grows in place (mremap, no copy). A
// freed one is kept for the next row group's buffers (mapping them afresh
// faulted every page in again: W2 from Parquet ran 22% slower), at most as
// many bytes as were in use at once since the last trim, and counted.
#ifndef SLUICE_IO_ARROW_MEMORY_POOL_H_
#define SLUICE_IO_ARROW_MEMORY_POOL_H_

#include <arrow/memory_pool.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace sluice::io {

// Thread-safe.
class MappedArrowPool : public arrow::MemoryPool {
 public:
  // Buffers from this size on are mapped; smaller ones come from the heap.
  static constexpr int64_t kMappedFrom = int64_t{256} << 10;

  ~MappedArrowPool() override { Trim(); }

  arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t** out) override;
  arrow::Status Reallocate(int64_t old_size, int64_t new_size, int64_t alignment, uint8_t** ptr) override;
  void Free(uint8_t* buffer, int64_t size, int64_t alignment) override;

  // Counts the pages of mapped buffers (a kept one reused keeps its
  // length), the bytes of the others.
  int64_t bytes_allocated() const override { return bytes_.load(std::memory_order_relaxed); }
  int64_t max_memory() const override { return peak_.load(std::memory_order_relaxed); }
  int64_t total_bytes_allocated() const override { return total_.load(std::memory_order_relaxed); }
  int64_t num_allocations() const override { return allocations_.load(std::memory_order_relaxed); }
  std::string backend_name() const override { return "sluice-mapped"; }

  // The bytes of freed buffers kept for reuse.
  int64_t cached_bytes() const;
  // Unmaps them, and starts counting the most in use at once afresh.
  void Trim();

 private:
  static bool Mapped(int64_t size) { return size >= kMappedFrom; }
  void Count(int64_t bytes);
  // A mapping of at least `bytes`: a kept one, or a new one.
  arrow::Status Map(int64_t bytes, uint8_t** out);
  // Grown (in place where it can), or shrunk when it would use under half.
  arrow::Status ResizeMapped(int64_t bytes, uint8_t** ptr);
  void FreeMapped(uint8_t* buffer);

  std::atomic<int64_t> bytes_{0}, peak_{0}, total_{0}, allocations_{0};
  std::atomic<int64_t> recent_peak_{0};  // the most in use at once since the last Trim
  mutable absl::Mutex mu_;
  std::multimap<int64_t, uint8_t*> kept_ ABSL_GUARDED_BY(mu_);           // by mapped length
  absl::flat_hash_map<uint8_t*, int64_t> lengths_ ABSL_GUARDED_BY(mu_);  // of those in use
  int64_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::io

#endif  // SLUICE_IO_ARROW_MEMORY_POOL_H_
