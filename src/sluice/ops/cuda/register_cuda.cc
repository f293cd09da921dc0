// The cuda backend: its runtime and the ops' cuda kernels, registered by
// RegisterBuiltinOps in builds with SLUICE_WITH_CUDA (the decode ops' when
// nvJPEG was found too).
#include "sluice/core/status_macros.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace cuda {
absl::Status RegisterCudaColorKernels(OpRegistry* registry);
absl::Status RegisterCudaDecodeKernels(OpRegistry* registry);
absl::Status RegisterCudaFilterKernels(OpRegistry* registry);
absl::Status RegisterCudaGeometryKernels(OpRegistry* registry);
absl::Status RegisterCudaNormalizeKernels(OpRegistry* registry);
absl::Status RegisterCudaResampleKernels(OpRegistry* registry);
}  // namespace cuda

absl::Status RegisterCudaBackend(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddRuntime(cuda::MakeCudaRuntime()));
  SLUICE_RETURN_IF_ERROR(cuda::RegisterCudaColorKernels(registry));
#ifdef SLUICE_WITH_NVJPEG
  SLUICE_RETURN_IF_ERROR(cuda::RegisterCudaDecodeKernels(registry));
#endif
  SLUICE_RETURN_IF_ERROR(cuda::RegisterCudaFilterKernels(registry));
  SLUICE_RETURN_IF_ERROR(cuda::RegisterCudaGeometryKernels(registry));
  SLUICE_RETURN_IF_ERROR(cuda::RegisterCudaNormalizeKernels(registry));
  return cuda::RegisterCudaResampleKernels(registry);
}

}  // namespace sluice::ops
