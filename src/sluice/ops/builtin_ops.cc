#include "sluice/ops/builtin_ops.h"

#include "sluice/core/status_macros.h"

namespace sluice::ops {

absl::Status RegisterBuiltinOps(OpRegistry* registry) {
  using Register = absl::Status (*)(OpRegistry*);
  // The cpu families first: a cuda kernel joins an op registered here.
  for (Register family : {
           RegisterParseOps,
           RegisterDecodeOps,
           RegisterImageCropOps,
           RegisterCropMirrorNormalizeOps,
           RegisterColorOps,
           RegisterImageFilterOps,
           RegisterGeometryOps,
           RegisterPadCropOps,
           RegisterPixelOps,
           RegisterLabelMixOps,
           RegisterRandomErasingOps,
           RegisterColorJitterOps,
           RegisterAutoAugmentOps,
           RegisterPredicateOps,
           RegisterPythonOps,
#ifdef SLUICE_WITH_CUDA
           cuda::RegisterCudaRuntime,
           cuda::RegisterColorCudaKernels,
#ifdef SLUICE_WITH_NVJPEG
           cuda::RegisterDecodeCudaKernels,
#endif
           cuda::RegisterGeometryCudaKernels,
           cuda::RegisterImageCropCudaKernels,
           cuda::RegisterImageFilterCudaKernels,
           cuda::RegisterNormalizeCudaKernels,
#endif
       }) {
    SLUICE_RETURN_IF_ERROR(family(registry));
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops
