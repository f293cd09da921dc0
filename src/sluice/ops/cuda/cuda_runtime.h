// The cuda backend's runtime (ops/device_runtime.h) on the CUDA runtime API,
// and what the cuda kernels share: error conversion and the device pool.
#ifndef SLUICE_OPS_CUDA_CUDA_RUNTIME_H_
#define SLUICE_OPS_CUDA_CUDA_RUNTIME_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sluice/core/dtype.h"
#include "sluice/ops/cuda/elem_type.h"
#include "sluice/ops/device_runtime.h"

namespace sluice::ops::cuda {

// OK for cudaSuccess; otherwise Internal "<what>: <CUDA's message>".
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// `bytes` from the current device's pool, usable by work on `stream`;
// give it back with cudaFreeAsync. ResourceExhausted naming the bound
// when the pool would hold more than it (SLUICE_CUDA_MEMORY_LIMIT bytes;
// by default a quarter of the device's memory).
absl::StatusOr<void*> AllocateAsync(size_t bytes, cudaStream_t stream);

// The kernels' element type of `dtype`.
ElemType ElemTypeOf(DType dtype);

// Streams are per thread (each map runner queues on its own). Device
// memory comes from a stream-ordered pool per device (cudaMallocAsync on a
// pool of sluice's own that keeps what it took from the driver), so batches
// flowing through the GPU allocate nothing from the driver.
std::unique_ptr<DeviceRuntime> MakeCudaRuntime();

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_CUDA_RUNTIME_H_
