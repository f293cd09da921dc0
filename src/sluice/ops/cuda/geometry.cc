// The cuda kernels of random_flip, random_rotation, random_zoom, fused_warp
// and hwc_to_chw: the same params as the cpu kernels (geometry_params.h).
// Each row's affine map is drawn on the host exactly as the cpu kernels
// draw it, so a sample gets the same transform on either backend; only the
// resampling runs on the device.
#include <algorithm>
#include <vector>

#include "sluice/core/status_macros.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/cuda/device_scratch.h"
#include "sluice/ops/cuda/geometry_kernels.h"
#include "sluice/ops/geometry_params.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops::cuda {
namespace {

using kernels::Affine;
using kernels::FillMode;
using kernels::Then;
using kernels::WarpSpec;

DeviceImages ImagesOf(const WarpSpec& spec, int64_t rows) {
  return DeviceImages{rows, static_cast<int>(spec.dims.h), static_cast<int>(spec.dims.w), static_cast<int>(spec.dims.c),
                      spec.dtype == DType::kFloat32};
}

DeviceFill FillOf(FillMode mode) {
  switch (mode) {
    case FillMode::kConstant:
      return DeviceFill::kConstant;
    case FillMode::kNearest:
      return DeviceFill::kNearest;
    case FillMode::kReflect:
      break;
  }
  return DeviceFill::kReflect;
}

// The maps of the run's rows, map_of(r) each, as rows x 6 floats on the device.
template <typename MapOf>
absl::StatusOr<DeviceScratch> UploadMaps(const KernelContext& ctx, MapOf map_of) {
  thread_local std::vector<float> maps;
  maps.resize(ctx.rows * 6);
  for (int64_t r = 0; r < ctx.rows; ++r) {
    const Affine a = map_of(r);
    // The graph fuses only warps with a kernel here; a projective part
    // (random_perspective) has none.
    if (a.projective()) return absl::UnimplementedError("the cuda warp kernel takes affine maps only");
    std::copy(a.m, a.m + 6, maps.begin() + r * 6);
  }
  return DeviceScratch::Upload(maps.data(), maps.size() * sizeof(float), Stream(ctx));
}

absl::Status LaunchWarp(const KernelContext& ctx, const WarpSpec& spec, const DeviceScratch& maps, const ColumnRef& in,
                        const ColumnRef& out) {
  return CudaStatus(LaunchWarpAffine(ImagesOf(spec, ctx.rows), maps.as<float>(), FillOf(spec.fill_mode),
                                     spec.fill_value, in.data, out.data, Stream(ctx)),
                    "the warp's launch");
}

// One geometric op. A flip alone moves whole pixels, so it copies them, as
// the cpu kernel does.
class WarpCudaKernel : public Kernel {
 public:
  using Params = WarpParams;
  explicit WarpCudaKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    SLUICE_ASSIGN_OR_RETURN(DeviceScratch maps, UploadMaps(ctx, [&](int64_t r) {
                              SampleRng rng = ctx.Rng(r);
                              return SampleMap(p_.part, p_.spec.dims, rng);
                            }));
    if (p_.part.kind != WarpPart::Kind::kFlip) return LaunchWarp(ctx, p_.spec, maps, in[0], out[0]);
    return CudaStatus(LaunchFlip(ImagesOf(p_.spec, ctx.rows), maps.as<float>(), in[0].data, out[0].data, Stream(ctx)),
                      "the flip's launch");
  }

 private:
  const Params p_;
};

// Consecutive warps: their maps composed per row as the cpu kernel
// composes them (each part drawing from its own op's stream), one resampling.
class FusedWarpCudaKernel : public Kernel {
 public:
  using Params = FusedWarpParams;
  explicit FusedWarpCudaKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    SLUICE_ASSIGN_OR_RETURN(DeviceScratch maps, UploadMaps(ctx, [&](int64_t r) {
                              Affine map;
                              for (const auto& [part, op_key] : p_.parts) {
                                SampleRng rng = ctx.RngFor(op_key, r);
                                map = Then(map, SampleMap(part, p_.spec.dims, rng));
                              }
                              return map;
                            }));
    return LaunchWarp(ctx, p_.spec, maps, in[0], out[0]);
  }

 private:
  const Params p_;
};

class HwcToChwCudaKernel : public Kernel {
 public:
  using Params = HwcToChwParams;
  explicit HwcToChwCudaKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    return CudaStatus(LaunchHwcToChw(in[0].data, ctx.rows, p_.dims.h * p_.dims.w, p_.dims.c, static_cast<int>(p_.elem),
                                     out[0].data, Stream(ctx)),
                      "hwc_to_chw's launch");
  }

 private:
  const Params p_;
};

}  // namespace

absl::Status RegisterGeometryCudaKernels(OpRegistry* registry) {
  for (const char* op : {"random_flip", "random_rotation", "random_zoom"}) {
    SLUICE_RETURN_IF_ERROR(registry->AddKernel<WarpCudaKernel>(op, Backend::kCuda));
  }
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<FusedWarpCudaKernel>(kFusedWarpOp, Backend::kCuda));
  return registry->AddKernel<HwcToChwCudaKernel>("hwc_to_chw", Backend::kCuda);
}

}  // namespace sluice::ops::cuda
