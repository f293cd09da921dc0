// The element types the cuda kernels read and write (sluice's DTypes), in
// plain C++ for both compilers.
#ifndef SLUICE_OPS_CUDA_ELEM_TYPE_H_
#define SLUICE_OPS_CUDA_ELEM_TYPE_H_

#include <cstdint>

namespace sluice::ops::cuda {

// The element types the kernels read and write (sluice's DTypes).
enum class ElemType : uint8_t { kUInt8, kInt32, kInt64, kFloat32, kFloat16 };

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_ELEM_TYPE_H_
