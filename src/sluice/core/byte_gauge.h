// Bytes held process-wide by one kind of memory outside the engine's pool
// (objects' blocks fetched ahead, Python processes' shared memory): now,
// and the most at once so far. Lock-free; a static instance per kind.
#ifndef SLUICE_CORE_BYTE_GAUGE_H_
#define SLUICE_CORE_BYTE_GAUGE_H_

#include <atomic>
#include <cstdint>

namespace sluice {

class ByteGauge {
 public:
  // Adds `bytes` (negative: gives them back).
  void Add(int64_t bytes) { RaisePeak(now_.fetch_add(bytes, std::memory_order_relaxed) + bytes); }
  // Adds `bytes` only if the total stays within `limit`; whether it did.
  bool AddWithin(int64_t bytes, int64_t limit) {
    int64_t now = now_.load(std::memory_order_relaxed);
    do {
      if (now + bytes > limit) return false;
    } while (!now_.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
    RaisePeak(now + bytes);
    return true;
  }
  int64_t now() const { return now_.load(std::memory_order_relaxed); }
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }

 private:
  void RaisePeak(int64_t now) {
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }

  std::atomic<int64_t> now_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace sluice

#endif  // SLUICE_CORE_BYTE_GAUGE_H_
