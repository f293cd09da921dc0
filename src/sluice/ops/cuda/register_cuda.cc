// The cuda backend: its runtime and the ops' cuda kernels, registered by
// RegisterBuiltinOps in builds with SLUICE_WITH_CUDA.
#include "sluice/core/status_macros.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace cuda {
absl::Status RegisterCudaColorKernels(OpRegistry* registry);
}  // namespace cuda

absl::Status RegisterCudaBackend(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddRuntime(cuda::MakeCudaRuntime()));
  return cuda::RegisterCudaColorKernels(registry);
}

}  // namespace sluice::ops
