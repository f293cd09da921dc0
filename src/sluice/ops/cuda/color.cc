// The cuda kernels of cast, rescale and normalize: the same params as the
// cpu kernels (color_params.h), the launches on the run's stream.
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/color_params.h"
#include "sluice/ops/cuda/color_kernels.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/cuda/device_scratch.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops::cuda {
namespace {

class RescaleCudaKernel : public Kernel {
 public:
  using Params = RescaleParams;
  explicit RescaleCudaKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    return CudaStatus(LaunchRescale(in[0].data, p_.from == DType::kFloat32, ctx.rows * p_.elems, p_.scale, p_.offset,
                                    reinterpret_cast<float*>(out[0].data), Stream(ctx)),
                      "rescale's launch");
  }

 private:
  const Params p_;
};

// Its per-channel factors live in device memory, copied there once in Setup.
class NormalizeCudaKernel : public Kernel {
 public:
  using Params = NormalizeParams;
  explicit NormalizeCudaKernel(const Params& p) : p_(p) {}
  ~NormalizeCudaKernel() override { cudaFree(factors_); }

  absl::Status Setup(const SetupContext& ctx) override {
    const size_t c = p_.a.size();
    SLUICE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx.device), "cudaSetDevice"));
    SLUICE_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(reinterpret_cast<void**>(&factors_), 2 * c * sizeof(float)), "cudaMalloc"));
    std::vector<float> host = p_.a;
    host.insert(host.end(), p_.b.begin(), p_.b.end());
    return CudaStatus(cudaMemcpy(factors_, host.data(), 2 * c * sizeof(float), cudaMemcpyHostToDevice),
                      "copying normalize's factors");
  }

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const int64_t elems = p_.shape.num_elements();
    const int64_t channels = static_cast<int64_t>(p_.a.size());
    const int64_t plane = p_.channels_first ? elems / channels : 1;
    return CudaStatus(LaunchNormalize(in[0].data, p_.from == DType::kFloat32, ctx.rows * elems, elems, channels, plane,
                                      p_.channels_first, factors_, factors_ + channels,
                                      reinterpret_cast<float*>(out[0].data), Stream(ctx)),
                      "normalize's launch");
  }

 private:
  const Params p_;
  float* factors_ = nullptr;  // a, then b: device memory
};

class CastCudaKernel : public Kernel {
 public:
  using Params = CastParams;
  explicit CastCudaKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    return CudaStatus(
        LaunchCast(in[0].data, ElemTypeOf(p_.from), ctx.rows * p_.elems, ElemTypeOf(p_.to), out[0].data, Stream(ctx)),
        "cast's launch");
  }

 private:
  const Params p_;
};

}  // namespace

absl::Status RegisterColorCudaKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<CastCudaKernel>("cast", Backend::kCuda));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<RescaleCudaKernel>("rescale", Backend::kCuda));
  return registry->AddKernel<NormalizeCudaKernel>("normalize", Backend::kCuda);
}

}  // namespace sluice::ops::cuda
