#include "sluice/core/index_permutation.h"

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

}  // namespace

IndexPermutation::IndexPermutation(int64_t n, uint64_t key) : n_(n), key_(key) {
  while (half_bits_ < 31 && (int64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
}

uint64_t IndexPermutation::Rounds(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (uint64_t round = 0; round < 4; ++round) {
    const uint64_t next = left ^ (Mix(right ^ (key_ + round * 0x9e3779b97f4a7c15ULL)) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t IndexPermutation::operator()(int64_t i) const {
  // The network permutes [0, 4^half_bits); following i's cycle to the first
  // value inside [0, n) keeps it a permutation of [0, n).
  uint64_t x = static_cast<uint64_t>(i);
  do {
    x = Rounds(x);
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

}  // namespace sluice
