#include "sluice/core/rng.h"

#include <cmath>

namespace sluice {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53;
constexpr uint32_t kMul1 = 0xCD9E8D57;
constexpr uint32_t kWeyl0 = 0x9E3779B9;
constexpr uint32_t kWeyl1 = 0xBB67AE85;

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// splitmix64 finalizer: spreads seed bits so nearby seeds give unrelated keys.
uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

}  // namespace

std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kMul0, ctr[0], &hi0, &lo0);
    MulHiLo(kMul1, ctr[2], &hi1, &lo1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

uint64_t OpKey(absl::string_view node_name, int op_position) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : node_name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  h ^= static_cast<uint64_t>(op_position) + 1;
  h *= 0x100000001b3ull;
  return h;
}

SampleRng::SampleRng(uint64_t seed, uint64_t op_key, uint64_t epoch, uint64_t sample_index) {
  uint64_t k = Mix64(seed ^ Mix64(op_key));
  // The counter holds the epoch's low 32 bits; higher ones (a repeat's
  // passes are numbered outer * 2^20 + i) go into the key, so that epoch
  // e + 2^32 draws anew. Epochs below 2^32 keep the key they always had.
  if (epoch >> 32 != 0) k = Mix64(k ^ Mix64(epoch >> 32));
  key_ = {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
  // counter_[3] counts blocks of four draws within the sample.
  counter_ = {static_cast<uint32_t>(sample_index), static_cast<uint32_t>(sample_index >> 32),
              static_cast<uint32_t>(epoch), 0};
}

uint32_t SampleRng::NextU32() {
  if (used_ == 4) {
    block_ = Philox4x32(counter_, key_);
    ++counter_[3];
    used_ = 0;
  }
  return block_[used_++];
}

float SampleRng::Uniform(float lo, float hi) {
  // 24 random mantissa bits give a float in [0, 1) exactly.
  const float u = static_cast<float>(NextU32() >> 8) * (1.0f / 16777216.0f);
  return lo + (hi - lo) * u;
}

double SampleRng::UniformDouble() {
  const uint64_t bits = (static_cast<uint64_t>(NextU32()) << 21) ^ (NextU32() >> 11);
  return static_cast<double>(bits) * 0x1.0p-53;
}

double SampleRng::Normal() {
  const double u = 1.0 - UniformDouble();  // (0, 1]: the log is finite
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * UniformDouble());
}

double SampleRng::Gamma(double shape) {
  // Marsaglia and Tsang, "A simple method for generating gamma variables"
  // (2000); below 1, Gamma(shape + 1) * U^(1/shape).
  if (shape < 1) return Gamma(shape + 1) * std::pow(1.0 - UniformDouble(), 1.0 / shape);
  const double d = shape - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  while (true) {
    double x, v;
    do {
      x = Normal();
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - UniformDouble();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double SampleRng::Beta(double a, double b) {
  const double x = Gamma(a), y = Gamma(b);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace sluice
