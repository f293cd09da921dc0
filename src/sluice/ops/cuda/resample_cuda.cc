// The cuda kernel of resize and random_resized_crop: each sample's window
// is drawn and its tap tables made on the host by the cpu kernel's own code
// (crop_window.h, resample.h), so that the device's two fixed-point passes
// compute the cpu's levels exactly.
#include <algorithm>
#include <cstring>
#include <vector>

#include "sluice/core/status_macros.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/cuda/device_scratch.h"
#include "sluice/ops/cuda/resample_kernels.h"
#include "sluice/ops/image_resample.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/resample.h"

namespace sluice::ops::cuda {
namespace {

using resample_internal::MakeTaps;
using resample_internal::Taps;

// A run's tap tables on the host, sample after sample.
struct HostTables {
  std::vector<ResampleSampleTaps> samples;
  std::vector<int> v_first, h_first;
  std::vector<int16_t> weights;

  void Clear() {
    samples.clear();
    v_first.clear();
    h_first.clear();
    weights.clear();
  }

  // Appends a sample's vertical and horizontal taps.
  void Add(const Taps& v, const Taps& h, int channels) {
    ResampleSampleTaps s;
    s.x_lo = h.first.front();
    s.cols = (h.first.back() + h.taps - s.x_lo) * channels;  // first never decreases
    s.v_taps = v.taps;
    s.h_taps = h.taps;
    s.v_weights = static_cast<int64_t>(weights.size());
    weights.insert(weights.end(), v.weights.begin(), v.weights.end());
    s.h_weights = static_cast<int64_t>(weights.size());
    weights.insert(weights.end(), h.weights.begin(), h.weights.end());
    v_first.insert(v_first.end(), v.first.begin(), v.first.end());
    for (const int first : h.first) h_first.push_back(first - s.x_lo);
    samples.push_back(s);
  }
};

// Appends `values` to `bytes` at an 8-byte boundary; returns their offset.
template <typename T>
size_t Append(const std::vector<T>& values, std::vector<uint8_t>* bytes) {
  const size_t at = (bytes->size() + 7) / 8 * 8;
  bytes->resize(at + values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes->data() + at, values.data(), values.size() * sizeof(T));
  return at;
}

class ResampleCudaKernel : public Kernel {
 public:
  using Params = ResampleParams;
  explicit ResampleCudaKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    if (ctx.rows == 0) return absl::OkStatus();
    ResampleShape shape;
    shape.rows = ctx.rows;
    shape.src_w = static_cast<int>(p_.in.w);
    shape.src_h = static_cast<int>(p_.in.h);
    shape.channels = static_cast<int>(p_.in.c);
    shape.out_w = static_cast<int>(p_.w);
    shape.out_h = static_cast<int>(p_.h);
    thread_local Taps v, h;
    thread_local HostTables host;
    host.Clear();
    int max_cols = 0;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const Window window = PickWindow(p_.window, shape.src_w, shape.src_h, ctx, r);
      MakeTaps(window.x, window.w, shape.src_w, shape.out_w, &h);
      MakeTaps(window.y, window.h, shape.src_h, shape.out_h, &v);
      host.Add(v, h, shape.channels);
      max_cols = std::max(max_cols, host.samples.back().cols);
    }
    shape.inter_stride = (max_cols + kResampleStrideAlign - 1) / kResampleStrideAlign * kResampleStrideAlign;
    // One upload for all the tables.
    thread_local std::vector<uint8_t> packed;
    packed.clear();
    const size_t samples_at = Append(host.samples, &packed);
    const size_t v_first_at = Append(host.v_first, &packed);
    const size_t h_first_at = Append(host.h_first, &packed);
    const size_t weights_at = Append(host.weights, &packed);
    SLUICE_ASSIGN_OR_RETURN(DeviceScratch tables_memory,
                            DeviceScratch::Upload(packed.data(), packed.size(), Stream(ctx)));
    const uint8_t* base = tables_memory.as<uint8_t>();
    ResampleTables tables;
    tables.samples = reinterpret_cast<const ResampleSampleTaps*>(base + samples_at);
    tables.v_first = reinterpret_cast<const int*>(base + v_first_at);
    tables.h_first = reinterpret_cast<const int*>(base + h_first_at);
    tables.weights = reinterpret_cast<const int16_t*>(base + weights_at);
    SLUICE_ASSIGN_OR_RETURN(
        DeviceScratch intermediate,
        DeviceScratch::Allocate(static_cast<size_t>(ctx.rows) * shape.out_h * shape.inter_stride * sizeof(int16_t),
                                Stream(ctx)));
    return CudaStatus(LaunchResample(in[0].data, shape, tables, intermediate.as<int16_t>(), out[0].data, Stream(ctx)),
                      "resample's launch");
  }

 private:
  const Params p_;
};

}  // namespace

absl::Status RegisterCudaResampleKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<ResampleCudaKernel>("resize", Backend::kCuda));
  return registry->AddKernel<ResampleCudaKernel>("random_resized_crop", Backend::kCuda);
}

}  // namespace sluice::ops::cuda
