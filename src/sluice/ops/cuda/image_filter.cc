// The cuda kernels of gaussian_blur and grey_dilation: the same params,
// border maps and taps as the cpu kernels (kernels/image_filter.h), the launches on
// the run's stream.
#include "sluice/kernels/image_filter.h"

#include <limits>
#include <utility>
#include <vector>

#include "sluice/core/status_macros.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/cuda/device_scratch.h"
#include "sluice/ops/cuda/image_filter_kernels.h"
#include "sluice/ops/image_filter_params.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops::cuda {
namespace {

using kernels::BorderMap;
using kernels::GaussianTaps;

// A filter's device tables, copied there once in Setup: the border maps of
// both axes and, for a blur with a fixed sigma, its taps.
class FilterCudaKernel : public Kernel {
 public:
  using Params = FilterParams;
  ~FilterCudaKernel() override {
    cudaFree(maps_);
    cudaFree(fixed_taps_);
  }

  absl::Status Setup(const SetupContext& ctx) override {
    SLUICE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx.device), "cudaSetDevice"));
    std::vector<int32_t> maps = BorderMap(p_.dims.w, p_.kw / 2, reflect_);
    const std::vector<int32_t> ymap = BorderMap(p_.dims.h, p_.kh / 2, reflect_);
    maps.insert(maps.end(), ymap.begin(), ymap.end());
    SLUICE_RETURN_IF_ERROR(CopyToDevice(maps, &maps_));
    return CopyToDevice(host_fixed_taps_, &fixed_taps_);
  }

 protected:
  FilterCudaKernel(const Params& p, bool reflect, std::vector<float> fixed_taps)
      : p_(p), reflect_(reflect), host_fixed_taps_(std::move(fixed_taps)) {}

  // Launches `launch` on the batch of ctx's rows, with the global scratch the
  // images need where they do not fit in shared memory.
  template <typename Launch>
  absl::Status RunFilter(const KernelContext& ctx, const ColumnRef& in, const ColumnRef& out, float fill,
                         const char* what, Launch launch) const {
    const ImageDims& d = p_.dims;
    const int kh = static_cast<int>(p_.kh), kw = static_cast<int>(p_.kw);
    SLUICE_ASSIGN_OR_RETURN(
        DeviceScratch mid,
        DeviceScratch::Allocate(FilterScratchFloats(ctx.rows, d.h, d.w, d.c, kh, kw) * sizeof(float), Stream(ctx)));
    const FilterBatch batch{in.data,
                            out.data,
                            p_.dtype == DType::kFloat32,
                            ctx.rows,
                            d.h,
                            d.w,
                            d.c,
                            kh,
                            kw,
                            maps_,
                            maps_ + d.w + kw - 1,
                            fill,
                            mid.as<float>()};
    return CudaStatus(launch(batch), what);
  }

  const Params p_;
  float* fixed_taps_ = nullptr;  // device memory; null unless the taps are fixed

 private:
  template <typename V>
  static absl::Status CopyToDevice(const std::vector<V>& host, V** device) {
    if (host.empty()) return absl::OkStatus();
    const size_t bytes = host.size() * sizeof(V);
    SLUICE_RETURN_IF_ERROR(CudaStatus(cudaMalloc(reinterpret_cast<void**>(device), bytes), "cudaMalloc"));
    return CudaStatus(cudaMemcpy(*device, host.data(), bytes, cudaMemcpyHostToDevice), "copying a filter's tables");
  }

  const bool reflect_;
  const std::vector<float> host_fixed_taps_;
  int32_t* maps_ = nullptr;  // device memory: the x map, then the y map
};

class GaussianBlurCudaKernel : public FilterCudaKernel {
 public:
  explicit GaussianBlurCudaKernel(const Params& p) : FilterCudaKernel(p, /*reflect=*/true, FixedTaps(p)) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const int64_t per_row = TapsPerRow(p_);
    const int y_offset = p_.kh == p_.kw ? 0 : static_cast<int>(p_.kw);
    if (fixed_taps_ != nullptr) {
      return RunFilter(ctx, in[0], out[0], 0.f, "gaussian_blur's launch", [&](const FilterBatch& batch) {
        return LaunchGaussianBlur(batch, fixed_taps_, 0, y_offset, Stream(ctx));
      });
    }
    // One sigma per sample for both axes, drawn as the cpu kernel draws it;
    // the taps are computed on the device.
    thread_local std::vector<float> sigmas;
    sigmas.resize(ctx.rows);
    for (int64_t r = 0; r < ctx.rows; ++r) sigmas[r] = ctx.Rng(r).Uniform(p_.sigma_lo, p_.sigma_hi);
    SLUICE_ASSIGN_OR_RETURN(DeviceScratch device_sigmas,
                            DeviceScratch::Upload(sigmas.data(), sigmas.size() * sizeof(float), Stream(ctx)));
    SLUICE_ASSIGN_OR_RETURN(DeviceScratch taps,
                            DeviceScratch::Allocate(ctx.rows * per_row * sizeof(float), Stream(ctx)));
    SLUICE_RETURN_IF_ERROR(CudaStatus(
        LaunchGaussianTaps(device_sigmas.as<float>(), ctx.rows, p_.kw, p_.kh, taps.as<float>(), per_row, Stream(ctx)),
        "gaussian_blur's taps launch"));
    return RunFilter(ctx, in[0], out[0], 0.f, "gaussian_blur's launch", [&](const FilterBatch& batch) {
      return LaunchGaussianBlur(batch, taps.as<float>(), per_row, y_offset, Stream(ctx));
    });
  }

 private:
  // The horizontal taps, then the vertical ones unless they are the same.
  static int64_t TapsPerRow(const Params& p) { return p.kw + (p.kh == p.kw ? 0 : p.kh); }
  static void DrawTaps(const Params& p, float sigma, float* taps) {
    GaussianTaps(p.kw, sigma, taps);
    if (p.kh != p.kw) GaussianTaps(p.kh, sigma, taps + p.kw);
  }
  static std::vector<float> FixedTaps(const Params& p) {
    if (p.sigma_lo != p.sigma_hi) return {};
    std::vector<float> taps(TapsPerRow(p));
    DrawTaps(p, p.sigma_lo, taps.data());
    return taps;
  }
};

class GreyDilationCudaKernel : public FilterCudaKernel {
 public:
  explicit GreyDilationCudaKernel(const Params& p) : FilterCudaKernel(p, /*reflect=*/false, {}) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    // Pixels outside the image never win the max: they hold the lowest value.
    const float fill = p_.dtype == DType::kFloat32 ? std::numeric_limits<float>::lowest() : 0.f;
    return RunFilter(ctx, in[0], out[0], fill, "grey_dilation's launch",
                     [&](const FilterBatch& batch) { return LaunchGreyDilation(batch, Stream(ctx)); });
  }
};

}  // namespace

absl::Status RegisterImageFilterCudaKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<GaussianBlurCudaKernel>("gaussian_blur", Backend::kCuda));
  return registry->AddKernel<GreyDilationCudaKernel>("grey_dilation", Backend::kCuda);
}

}  // namespace sluice::ops::cuda
