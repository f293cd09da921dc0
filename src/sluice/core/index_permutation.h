// A permutation of [0, n) drawn from a 64-bit key and computed index by
// index, without a table: a 1.28M-item dataset's epoch order costs no
// memory and any one of its places is found in O(1), so a reader handed
// records [a, b) of a shuffled epoch reads items perm(a) .. perm(b - 1).
//
// A balanced Feistel network (four rounds, each a 64-bit mix of its half
// and the key) over the smallest power of four >= n, walking each cycle
// until it lands in [0, n) (fewer than four steps on average). Thread-safe.
#ifndef SLUICE_CORE_INDEX_PERMUTATION_H_
#define SLUICE_CORE_INDEX_PERMUTATION_H_

#include <cstdint>

namespace sluice {

class IndexPermutation {
 public:
  // REQUIRES: n >= 1.
  IndexPermutation(int64_t n, uint64_t key);

  // REQUIRES: 0 <= i < n.
  int64_t operator()(int64_t i) const;
  int64_t size() const { return n_; }

 private:
  uint64_t Rounds(uint64_t x) const;

  int64_t n_;
  int half_bits_ = 1;
  uint64_t half_mask_ = 1;
  uint64_t key_;
};

}  // namespace sluice

#endif  // SLUICE_CORE_INDEX_PERMUTATION_H_
