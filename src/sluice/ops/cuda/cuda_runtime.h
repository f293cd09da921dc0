// The cuda backend's runtime (ops/device_runtime.h) on the CUDA runtime API,
// and the error conversion the cuda kernels share.
#ifndef SLUICE_OPS_CUDA_CUDA_RUNTIME_H_
#define SLUICE_OPS_CUDA_CUDA_RUNTIME_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sluice/ops/device_runtime.h"

namespace sluice::ops::cuda {

// OK for cudaSuccess; otherwise Internal "<what>: <CUDA's message>".
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// Streams are per thread (each map runner queues on its own). Device
// memory comes from cudaMalloc and goes back with cudaFree when the last
// Buffer reference drops; a pool replaces both when batches flow through
// the GPU at rate.
std::unique_ptr<DeviceRuntime> MakeCudaRuntime();

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_CUDA_RUNTIME_H_
