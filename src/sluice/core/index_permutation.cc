#include "sluice/core/index_permutation.h"

#include <cstddef>
#include <utility>

namespace sluice {
namespace {

// SplitMix64's finalizer: every input bit moves every output bit.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

// A uniform draw from [0, bound): the high half of a 64 x 64-bit product
// (its bias, under bound / 2^64, is far below any test's reach).
uint64_t Below(uint64_t random, uint64_t bound) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(random) * bound) >> 64);
}

}  // namespace

IndexPermutation::IndexPermutation(int64_t n, uint64_t key) : n_(n), key_(key) {
  if (n <= kTabled) {
    table_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) table_[i] = static_cast<uint32_t>(i);
    uint64_t state = Mix(key);
    for (int64_t i = n - 1; i > 0; --i) {
      state += kGolden;  // SplitMix64's stream
      std::swap(table_[i], table_[Below(Mix(state), static_cast<uint64_t>(i) + 1)]);
    }
    return;
  }
  while (half_bits_ < 31 && (int64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
}

uint64_t IndexPermutation::Rounds(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (uint64_t round = 0; round < kRounds; ++round) {
    const uint64_t next = left ^ (Mix(right ^ (key_ + round * kGolden)) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t IndexPermutation::operator()(int64_t i) const {
  if (!table_.empty()) return table_[static_cast<size_t>(i)];
  // The network permutes [0, 4^half_bits); following i's cycle to the first
  // value inside [0, n) keeps it a permutation of [0, n).
  uint64_t x = static_cast<uint64_t>(i);
  do {
    x = Rounds(x);
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

}  // namespace sluice
