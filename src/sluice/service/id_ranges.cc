#include "sluice/service/id_ranges.h"

#include <algorithm>

namespace sluice::service {

bool IdRanges::Overlaps(int64_t first, int64_t end) const {
  auto next = ranges_.lower_bound(end);  // the first range starting at or after `end`
  if (next == ranges_.begin()) return false;
  return std::prev(next)->second > first;
}

void IdRanges::Add(int64_t first, int64_t end) {
  if (first >= end) return;
  auto it = ranges_.upper_bound(first);
  if (it != ranges_.begin() && std::prev(it)->second >= first) --it;  // touches or overlaps from the left
  while (it != ranges_.end() && it->first <= end) {
    first = std::min(first, it->first);
    end = std::max(end, it->second);
    size_ -= it->second - it->first;
    it = ranges_.erase(it);
  }
  ranges_.emplace(first, end);
  size_ += end - first;
}

}  // namespace sluice::service
