#include "sluice/io/object_block_limit.h"

#include <atomic>
#include <cstdint>
#include <limits>
#include <set>

#include "absl/synchronization/mutex.h"

namespace sluice::io {
namespace {

struct Limits {
  absl::Mutex mu;
  std::multiset<int64_t> live ABSL_GUARDED_BY(mu);
  // The smallest of `live`: read on every fetch, so kept apart from the lock.
  std::atomic<int64_t> smallest{std::numeric_limits<int64_t>::max()};

  void Update() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    smallest.store(live.empty() ? std::numeric_limits<int64_t>::max() : *live.begin());
  }
};

Limits& TheLimits() {
  static auto* limits = new Limits;  // never destroyed: readers may outlive static destruction
  return *limits;
}

}  // namespace

ObjectBlockLimit::ObjectBlockLimit(int64_t bytes) : bytes_(bytes) {
  Limits& l = TheLimits();
  absl::MutexLock lock(&l.mu);
  l.live.insert(bytes_);
  l.Update();
}

ObjectBlockLimit::~ObjectBlockLimit() {
  Limits& l = TheLimits();
  absl::MutexLock lock(&l.mu);
  l.live.erase(l.live.find(bytes_));
  l.Update();
}

int64_t ObjectBlockLimitBytes() { return TheLimits().smallest.load(std::memory_order_relaxed); }

}  // namespace sluice::io
