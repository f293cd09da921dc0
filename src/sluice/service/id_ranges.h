// A set of sample ids kept as disjoint ranges: the ids of a split arrive in
// runs of consecutive records, so a whole batch is one range to add and
// one to test, where a hash set took an insert per sample (~2% of a
// client's CPU).
#ifndef SLUICE_SERVICE_ID_RANGES_H_
#define SLUICE_SERVICE_ID_RANGES_H_

#include <cstdint>
#include <map>

namespace sluice::service {

class IdRanges {
 public:
  // Whether any id in [first, end) is in the set.
  bool Overlaps(int64_t first, int64_t end) const;
  // Adds [first, end), merging with the ranges it touches.
  void Add(int64_t first, int64_t end);
  // Ids in the set.
  int64_t size() const { return size_; }

 private:
  std::map<int64_t, int64_t> ranges_;  // first -> end, disjoint, not touching
  int64_t size_ = 0;
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_ID_RANGES_H_
