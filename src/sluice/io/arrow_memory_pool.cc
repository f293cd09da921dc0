#include "sluice/io/arrow_memory_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>

namespace sluice::io {
namespace {

void RaiseTo(std::atomic<int64_t>* peak, int64_t now) {
  int64_t seen = peak->load(std::memory_order_relaxed);
  while (now > seen && !peak->compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

int64_t PageRounded(int64_t size) {
  static const int64_t page = sysconf(_SC_PAGESIZE);
  return (size + page - 1) / page * page;
}

arrow::Status Resize(uint8_t** mapping, int64_t from, int64_t to) {
  if (from == to) return arrow::Status::OK();
  void* p = mremap(*mapping, from, to, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) return arrow::Status::OutOfMemory("resizing a decoded column's buffer to ", to, " bytes failed");
  *mapping = static_cast<uint8_t*>(p);
  return arrow::Status::OK();
}

}  // namespace

void MappedArrowPool::Count(int64_t bytes) {
  const int64_t now = bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  RaiseTo(&peak_, now);
  RaiseTo(&recent_peak_, now);
  if (bytes > 0) total_.fetch_add(bytes, std::memory_order_relaxed);
}

arrow::Status MappedArrowPool::Map(int64_t bytes, uint8_t** out) {
  absl::MutexLock lock(&mu_);
  int64_t length = bytes;
  auto longer = kept_.lower_bound(bytes);
  if (longer != kept_.end() && (longer->first <= 2 * bytes || longer == kept_.begin())) {
    // The shortest that holds it; one much longer only when none is
    // shorter: a buffer that starts small grows into it (by doubling).
    length = longer->first;
    *out = longer->second;
    kept_bytes_ -= length;
    kept_.erase(longer);
  } else if (longer != kept_.begin()) {
    // The longest shorter one, grown: its pages are in already.
    auto shorter = std::prev(longer);
    const int64_t from = shorter->first;
    *out = shorter->second;
    kept_bytes_ -= from;
    kept_.erase(shorter);
    if (arrow::Status s = Resize(out, from, bytes); !s.ok()) {
      munmap(*out, from);
      return s;
    }
  } else {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return arrow::Status::OutOfMemory("mapping ", bytes, " bytes for a decoded column failed");
    *out = static_cast<uint8_t*>(p);
  }
  lengths_[*out] = length;
  Count(length);
  return arrow::Status::OK();
}

arrow::Status MappedArrowPool::ResizeMapped(int64_t bytes, uint8_t** ptr) {
  absl::MutexLock lock(&mu_);
  auto it = lengths_.find(*ptr);
  const int64_t length = it->second;
  // Within its pages it stays; shrunk below half, it gives the rest back.
  if (bytes <= length && 2 * bytes >= length) return arrow::Status::OK();
  uint8_t* grown = *ptr;
  ARROW_RETURN_NOT_OK(Resize(&grown, length, bytes));  // on failure the old buffer stays, as Arrow expects
  lengths_.erase(it);
  *ptr = grown;
  lengths_[grown] = bytes;
  Count(bytes - length);
  return arrow::Status::OK();
}

void MappedArrowPool::FreeMapped(uint8_t* buffer) {
  absl::MutexLock lock(&mu_);
  auto it = lengths_.find(buffer);
  const int64_t length = it->second;
  lengths_.erase(it);
  Count(-length);
  if (kept_bytes_ + length <= recent_peak_.load(std::memory_order_relaxed)) {
    kept_.emplace(length, buffer);
    kept_bytes_ += length;
  } else {
    munmap(buffer, length);
  }
}

arrow::Status MappedArrowPool::Allocate(int64_t size, int64_t alignment, uint8_t** out) {
  // Pages are aligned to more than any alignment Arrow asks for (64).
  if (Mapped(size)) {
    ARROW_RETURN_NOT_OK(Map(PageRounded(size), out));
  } else {
    ARROW_RETURN_NOT_OK(arrow::system_memory_pool()->Allocate(size, alignment, out));
    Count(size);
  }
  allocations_.fetch_add(1, std::memory_order_relaxed);
  return arrow::Status::OK();
}

arrow::Status MappedArrowPool::Reallocate(int64_t old_size, int64_t new_size, int64_t alignment, uint8_t** ptr) {
  if (Mapped(old_size) && Mapped(new_size)) return ResizeMapped(PageRounded(new_size), ptr);
  if (!Mapped(old_size) && !Mapped(new_size)) {
    ARROW_RETURN_NOT_OK(arrow::system_memory_pool()->Reallocate(old_size, new_size, alignment, ptr));
    Count(new_size - old_size);
    return arrow::Status::OK();
  }
  // Across the threshold: a new buffer of the other kind, and a copy.
  uint8_t* moved = nullptr;
  ARROW_RETURN_NOT_OK(Allocate(new_size, alignment, &moved));
  std::memcpy(moved, *ptr, static_cast<size_t>(std::min(old_size, new_size)));
  Free(*ptr, old_size, alignment);
  allocations_.fetch_sub(1, std::memory_order_relaxed);  // one buffer, reallocated
  *ptr = moved;
  return arrow::Status::OK();
}

void MappedArrowPool::Free(uint8_t* buffer, int64_t size, int64_t alignment) {
  if (Mapped(size)) {
    FreeMapped(buffer);
    return;
  }
  arrow::system_memory_pool()->Free(buffer, size, alignment);
  Count(-size);
}

int64_t MappedArrowPool::cached_bytes() const {
  absl::MutexLock lock(&mu_);
  return kept_bytes_;
}

void MappedArrowPool::Trim() {
  absl::MutexLock lock(&mu_);
  for (const auto& [length, mapping] : kept_) munmap(mapping, length);
  kept_.clear();
  kept_bytes_ = 0;
  recent_peak_.store(bytes_allocated(), std::memory_order_relaxed);
}

}  // namespace sluice::io
