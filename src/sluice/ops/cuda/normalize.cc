// The cuda kernel of crop_mirror_normalize: the cpu kernel's params
// (normalize_params.h), the launch on the run's stream.
#include <optional>
#include <vector>

#include "sluice/core/status_macros.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/cuda/crop_layout.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/cuda/device_scratch.h"
#include "sluice/ops/cuda/normalize_kernels.h"
#include "sluice/ops/normalize_params.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops::cuda {
namespace {

using kernels::NormalizeLayout;

// Its a and b per channel live in device memory, copied there once in
// Setup; the mirrors are drawn on the host, one flag per row uploaded.
class CropMirrorNormalizeCudaKernel : public Kernel {
 public:
  using Params = CropMirrorNormalizeParams;
  explicit CropMirrorNormalizeCudaKernel(const Params& p) : p_(p) {}
  ~CropMirrorNormalizeCudaKernel() override { cudaFree(factors_); }

  absl::Status Setup(const SetupContext& ctx) override {
    const NormalizeLayout& l = p_.normalizer.layout();
    std::vector<float> host = l.a;
    host.insert(host.end(), l.b.begin(), l.b.end());
    SLUICE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx.device), "cudaSetDevice"));
    SLUICE_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(reinterpret_cast<void**>(&factors_), host.size() * sizeof(float)), "cudaMalloc"));
    return CudaStatus(cudaMemcpy(factors_, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
                      "copying crop_mirror_normalize's factors");
  }

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const NormalizeLayout& l = p_.normalizer.layout();
    const CropLayout crop = CenterCropLayout(p_.in, p_.h, p_.w, l.chw, in[0], out[0]);
    std::optional<DeviceScratch> flags;
    bool all = false;
    if (p_.normalizer.random()) {
      // Drawn as the cpu kernel draws them, so a sample mirrors alike on both.
      std::vector<uint8_t> host(static_cast<size_t>(ctx.rows));
      for (int64_t r = 0; r < ctx.rows; ++r) host[r] = p_.normalizer.Mirror(ctx, r, ctx.op_key);
      SLUICE_ASSIGN_OR_RETURN(flags, DeviceScratch::Upload(host.data(), host.size(), Stream(ctx)));
    } else {
      all = p_.normalizer.Mirror(ctx, 0, ctx.op_key);  // every row alike, nothing drawn
    }
    return CudaStatus(LaunchCropMirrorNormalize(in[0].data, ctx.rows, crop, factors_, factors_ + l.channels,
                                                flags ? flags->as<uint8_t>() : nullptr, all, ElemTypeOf(l.out),
                                                out[0].data, Stream(ctx)),
                      "crop_mirror_normalize's launch");
  }

 private:
  const Params p_;
  float* factors_ = nullptr;  // a, then b: device memory
};

}  // namespace

absl::Status RegisterNormalizeCudaKernels(OpRegistry* registry) {
  return registry->AddKernel<CropMirrorNormalizeCudaKernel>("crop_mirror_normalize", Backend::kCuda);
}

}  // namespace sluice::ops::cuda
