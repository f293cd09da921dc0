// The built-in op families: one registration function per family (the
// family's .cc, and its cuda kernels' in cuda/ under the same stem), all
// called from one list, RegisterBuiltinOps (builtin_ops.cc).
#ifndef SLUICE_OPS_BUILTIN_OPS_H_
#define SLUICE_OPS_BUILTIN_OPS_H_

#include "absl/status/status.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {

absl::Status RegisterAutoAugmentOps(OpRegistry* registry);
absl::Status RegisterColorJitterOps(OpRegistry* registry);
absl::Status RegisterColorOps(OpRegistry* registry);
absl::Status RegisterCropMirrorNormalizeOps(OpRegistry* registry);
absl::Status RegisterDecodeOps(OpRegistry* registry);
absl::Status RegisterGeometryOps(OpRegistry* registry);
absl::Status RegisterImageCropOps(OpRegistry* registry);
absl::Status RegisterImageFilterOps(OpRegistry* registry);
absl::Status RegisterLabelMixOps(OpRegistry* registry);
absl::Status RegisterPadCropOps(OpRegistry* registry);
absl::Status RegisterParseOps(OpRegistry* registry);
absl::Status RegisterPixelOps(OpRegistry* registry);
absl::Status RegisterPredicateOps(OpRegistry* registry);
absl::Status RegisterPythonOps(OpRegistry* registry);
absl::Status RegisterRandomErasingOps(OpRegistry* registry);

#ifdef SLUICE_WITH_CUDA
namespace cuda {
// The cuda backend's runtime (cuda/cuda_runtime.cc) and the families'
// cuda kernels; decode's only where nvJPEG was found.
absl::Status RegisterCudaRuntime(OpRegistry* registry);
absl::Status RegisterColorCudaKernels(OpRegistry* registry);
absl::Status RegisterDecodeCudaKernels(OpRegistry* registry);
absl::Status RegisterGeometryCudaKernels(OpRegistry* registry);
absl::Status RegisterImageCropCudaKernels(OpRegistry* registry);
absl::Status RegisterImageFilterCudaKernels(OpRegistry* registry);
absl::Status RegisterNormalizeCudaKernels(OpRegistry* registry);
}  // namespace cuda
#endif

// Every built-in op with its cpu kernel, and in CUDA builds the cuda
// runtime and kernels. OpRegistry::Global() calls it once.
absl::Status RegisterBuiltinOps(OpRegistry* registry);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_BUILTIN_OPS_H_
