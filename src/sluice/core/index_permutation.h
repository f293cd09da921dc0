// A permutation of [0, n) drawn from a 64-bit key, any one of its places
// found in O(1), so a reader handed records [a, b) of a shuffled epoch reads
// items perm(a) .. perm(b - 1).
//
// Up to kTabled items it is a table filled by a Fisher-Yates shuffle: a
// uniform draw among all n! orders. (A Feistel network over a small domain
// is far from uniform: every order it made of 16 items was even, and of 20
// it put low items early.) Above, where a table would cost memory (a
// 1.28M-item dataset's order costs none), it is a balanced Feistel network
// of kRounds rounds, each a 64-bit mix of its half and the key, over the
// smallest power of four >= n (halves of 11 bits or more), walking each
// cycle until it lands in [0, n) (fewer than four steps on average).
// Thread-safe.
#ifndef SLUICE_CORE_INDEX_PERMUTATION_H_
#define SLUICE_CORE_INDEX_PERMUTATION_H_

#include <cstdint>
#include <vector>

namespace sluice {

class IndexPermutation {
 public:
  // Orders of at most this many items are tables (4 MiB at most).
  static constexpr int64_t kTabled = int64_t{1} << 20;

  // REQUIRES: n >= 1.
  IndexPermutation(int64_t n, uint64_t key);

  // REQUIRES: 0 <= i < n.
  int64_t operator()(int64_t i) const;
  int64_t size() const { return n_; }

 private:
  static constexpr int kRounds = 12;
  uint64_t Rounds(uint64_t x) const;

  int64_t n_;
  int half_bits_ = 1;
  uint64_t half_mask_ = 1;
  uint64_t key_;
  std::vector<uint32_t> table_;  // n <= kTabled
};

}  // namespace sluice

#endif  // SLUICE_CORE_INDEX_PERMUTATION_H_
