// Device helpers the .cu files share: runs of values loaded and stored as
// one aligned access.
#ifndef SLUICE_OPS_CUDA_PACK_CUH_
#define SLUICE_OPS_CUDA_PACK_CUH_

#include <cstddef>
#include <cstdint>

namespace sluice::ops::cuda {

// The alignment of a run of `bytes` bytes: its largest power-of-two
// divisor, at most 16 (one access).
template <size_t kBytes>
constexpr size_t kRunAlignment = (kBytes & (~kBytes + 1)) < 16 ? (kBytes & (~kBytes + 1)) : 16;

// N values, aligned for the widest accesses their size allows.
template <typename T, int N>
struct alignas(kRunAlignment<N * sizeof(T)>) Pack {
  T v[N];
};

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_PACK_CUH_
