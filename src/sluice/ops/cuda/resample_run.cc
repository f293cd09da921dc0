#include "sluice/ops/cuda/resample_run.h"

#include <algorithm>
#include <cstring>

#include "sluice/core/status_macros.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/cuda/device_scratch.h"

namespace sluice::ops::cuda {
namespace {

using kernels::Window;

static_assert(kResampleMostRoundedTaps == kernels::resample_internal::kMostRoundedTaps);

// Appends `values` to `bytes` at an 8-byte boundary; returns their offset.
template <typename T>
size_t Append(const std::vector<T>& values, std::vector<uint8_t>* bytes) {
  const size_t at = (bytes->size() + 7) / 8 * 8;
  bytes->resize(at + values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes->data() + at, values.data(), values.size() * sizeof(T));
  return at;
}

}  // namespace

void ResampleRun::Clear(int channels, int out_w, int out_h) {
  channels_ = channels;
  out_w_ = out_w;
  out_h_ = out_h;
  max_inter_stride_ = 0;
  inter_elems_ = 0;
  samples_.clear();
  v_first_.clear();
  h_first_.clear();
  weights_.clear();
}

void ResampleRun::Add(int64_t src_offset, int64_t src_stride, int src_w, int src_h, const Window& window) {
  kernels::resample_internal::MakeTaps(window.x, window.w, src_w, out_w_, window.inside, &h_);
  kernels::resample_internal::MakeTaps(window.y, window.h, src_h, out_h_, window.inside, &v_);
  ResampleSampleTaps s;
  s.src_offset = src_offset;
  s.src_stride = src_stride;
  s.x_lo = h_.first.front();
  s.cols = (h_.first.back() + h_.taps - s.x_lo) * channels_;  // first never decreases
  s.inter_stride = (s.cols + kResampleStrideAlign - 1) / kResampleStrideAlign * kResampleStrideAlign;
  s.inter_offset = inter_elems_;
  inter_elems_ += int64_t{out_h_} * s.inter_stride;
  s.v_taps = v_.taps;
  s.h_taps = h_.taps;
  s.v_weights = static_cast<int64_t>(weights_.size());
  weights_.insert(weights_.end(), v_.weights.begin(), v_.weights.end());
  s.h_weights = static_cast<int64_t>(weights_.size());
  weights_.insert(weights_.end(), h_.weights.begin(), h_.weights.end());
  v_first_.insert(v_first_.end(), v_.first.begin(), v_.first.end());
  for (const int first : h_.first) h_first_.push_back(first - s.x_lo);
  samples_.push_back(s);
  max_inter_stride_ = std::max(max_inter_stride_, s.inter_stride);
}

absl::Status ResampleRun::Queue(const uint8_t* in, uint8_t* out, cudaStream_t stream) {
  if (samples_.empty()) return absl::OkStatus();
  ResampleShape shape;
  shape.rows = static_cast<int64_t>(samples_.size());
  shape.channels = channels_;
  shape.out_w = out_w_;
  shape.out_h = out_h_;
  shape.max_inter_stride = max_inter_stride_;
  packed_.clear();
  const size_t samples_at = Append(samples_, &packed_);
  const size_t v_first_at = Append(v_first_, &packed_);
  const size_t h_first_at = Append(h_first_, &packed_);
  const size_t weights_at = Append(weights_, &packed_);
  SLUICE_ASSIGN_OR_RETURN(DeviceScratch tables_memory, DeviceScratch::Upload(packed_.data(), packed_.size(), stream));
  const uint8_t* base = tables_memory.as<uint8_t>();
  ResampleTables tables;
  tables.samples = reinterpret_cast<const ResampleSampleTaps*>(base + samples_at);
  tables.v_first = reinterpret_cast<const int*>(base + v_first_at);
  tables.h_first = reinterpret_cast<const int*>(base + h_first_at);
  tables.weights = reinterpret_cast<const int16_t*>(base + weights_at);
  SLUICE_ASSIGN_OR_RETURN(DeviceScratch intermediate,
                          DeviceScratch::Allocate(static_cast<size_t>(inter_elems_) * sizeof(int16_t), stream));
  return CudaStatus(LaunchResample(in, shape, tables, intermediate.as<int16_t>(), out, stream), "resample's launch");
}

}  // namespace sluice::ops::cuda
