// Counter-based random numbers: a draw is a pure function of (seed, op,
// epoch, sample index, draw number), so one seed yields the same augmented
// sample whichever thread or worker computes it, in whatever order.
#ifndef SLUICE_CORE_RNG_H_
#define SLUICE_CORE_RNG_H_

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace sluice {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11): ten rounds of multiply-xor over a 128-bit counter with a 64-bit key.
std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// A stable 64-bit id for an op instance: the same pipeline definition gives
// the same ids on every machine and run (FNV-1a of the node name and the
// op's position in it).
uint64_t OpKey(absl::string_view node_name, int op_position);

// The random stream of one sample for one op in one epoch. Cheap to create
// (no state beyond a few words); create one per sample.
class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t op_key, uint64_t epoch, uint64_t sample_index);

  uint32_t NextU32();
  // Uniform in [lo, hi); returns lo when lo == hi.
  float Uniform(float lo, float hi);
  // True with probability p.
  bool Bernoulli(float p) { return Uniform(0.f, 1.f) < p; }
  // Uniform in [0, 1) with 53 random bits.
  double UniformDouble();
  // Standard normal (Box-Muller).
  double Normal();
  // Gamma(shape, 1), shape > 0 (Marsaglia and Tsang's method).
  double Gamma(double shape);
  // Beta(a, b), a, b > 0: X / (X + Y) of X ~ Gamma(a), Y ~ Gamma(b).
  double Beta(double a, double b);

 private:
  std::array<uint32_t, 2> key_;
  std::array<uint32_t, 4> counter_;
  std::array<uint32_t, 4> block_;
  int used_ = 4;
};

}  // namespace sluice

#endif  // SLUICE_CORE_RNG_H_
