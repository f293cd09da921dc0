// The cuda kernels of resize and random_resized_crop (each sample's window
// drawn on the host by the cpu kernel's own code, crop_window.h, its taps
// made and resampled by ResampleRun) and of center_crop.
#include "sluice/core/status_macros.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/cuda/crop_layout.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/cuda/device_scratch.h"
#include "sluice/ops/cuda/resample_run.h"
#include "sluice/ops/image_crop_params.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops::cuda {
namespace {

class ResampleCudaKernel : public Kernel {
 public:
  using Params = ResampleParams;
  explicit ResampleCudaKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    if (ctx.rows == 0) return absl::OkStatus();
    const int src_w = static_cast<int>(p_.in.w);
    const int src_h = static_cast<int>(p_.in.h);
    thread_local ResampleRun run;
    run.Clear(static_cast<int>(p_.in.c), static_cast<int>(p_.w), static_cast<int>(p_.h));
    for (int64_t r = 0; r < ctx.rows; ++r) {
      run.Add(r * in[0].row_bytes, int64_t{src_w} * p_.in.c, src_w, src_h, PickWindow(p_.window, src_w, src_h, ctx, r));
    }
    return run.Queue(in[0].data, out[0].data, Stream(ctx));
  }

 private:
  const Params p_;
};

// A centre crop is crop_mirror_normalize's uint8 HWC copy, never mirrored.
class CenterCropCudaKernel : public Kernel {
 public:
  using Params = CenterCropParams;
  explicit CenterCropCudaKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const CropLayout crop = CenterCropLayout(p_.in, p_.h, p_.w, /*chw=*/false, in[0], out[0]);
    return CudaStatus(LaunchCropMirrorNormalize(in[0].data, ctx.rows, crop, nullptr, nullptr, nullptr,
                                                /*mirror_all=*/false, ElemType::kUInt8, out[0].data, Stream(ctx)),
                      "center_crop's launch");
  }

 private:
  const Params p_;
};

}  // namespace

absl::Status RegisterImageCropCudaKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<ResampleCudaKernel>("resize", Backend::kCuda));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<ResampleCudaKernel>("random_resized_crop", Backend::kCuda));
  return registry->AddKernel<CenterCropCudaKernel>("center_crop", Backend::kCuda);
}

}  // namespace sluice::ops::cuda
