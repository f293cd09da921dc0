// One run of the cuda resampler as its callers make it: each sample's
// window and tap tables drawn on the host with the cpu kernel's own code
// (resample.h), so that the device's two fixed-point passes compute the
// cpu's levels exactly; then one upload of all the tables and the launch.
// Shared by resize's kernel and the decode kernels.
#ifndef SLUICE_OPS_CUDA_RESAMPLE_RUN_H_
#define SLUICE_OPS_CUDA_RESAMPLE_RUN_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "sluice/kernels/image_decoder.h"
#include "sluice/kernels/resample.h"
#include "sluice/ops/cuda/resample_kernels.h"

namespace sluice::ops::cuda {

// Not thread-safe: one per thread, reused from run to run (Clear).
class ResampleRun {
 public:
  // Every sample of a run has `channels` channels and becomes out_w x out_h.
  void Clear(int channels, int out_w, int out_h);
  // Appends a sample: `window` of a src_w x src_h image whose first row is
  // `src_offset` bytes from the run's input, rows `src_stride` bytes apart.
  void Add(int64_t src_offset, int64_t src_stride, int src_w, int src_h, const kernels::Window& window);
  // Queues on `stream` the resampling of every sample added, from `in` to
  // `out` (dense out_h x out_w x channels images, one after another).
  absl::Status Queue(const uint8_t* in, uint8_t* out, cudaStream_t stream);

 private:
  int channels_ = 0, out_w_ = 0, out_h_ = 0;
  int max_inter_stride_ = 0;
  int64_t inter_elems_ = 0;  // the intermediate's size, in int16
  std::vector<ResampleSampleTaps> samples_;
  std::vector<int> v_first_, h_first_;
  std::vector<int16_t> weights_;
  kernels::resample_internal::Taps v_, h_;
  std::vector<uint8_t> packed_;
};

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_RESAMPLE_RUN_H_
