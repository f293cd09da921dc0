// Launchers of the cuda kernels of resize and random_resized_crop: the cpu
// resampler's two fixed-point passes (resample.h), vertical then
// horizontal, from tap tables computed on the host with the cpu's own code.
// Plain C++ declarations, so that the kernel class compiles with the host
// compiler and only the launchers with nvcc.
#ifndef SLUICE_OPS_CUDA_RESAMPLE_KERNELS_H_
#define SLUICE_OPS_CUDA_RESAMPLE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sluice::ops::cuda {

// Where one sample's source and taps lie (a sample's tap counts follow its
// window, and its source's size may be its own: they vary within a batch).
struct ResampleSampleTaps {
  int64_t src_offset = 0;  // bytes from `in` to the sample's first source row
  int64_t src_stride = 0;  // bytes per source row
  // Its out_h intermediate rows: the first at `inter_offset` int16 into
  // the intermediate, `inter_stride` apart (its cols rounded up to a
  // multiple of kResampleStrideAlign), so one wide sample costs its own
  // rows only.
  int64_t inter_offset = 0;
  int inter_stride = 0;
  int64_t v_weights = 0;  // index of its out_h * v_taps vertical weights
  int64_t h_weights = 0;  // index of its out_w * h_taps horizontal weights
  int x_lo = 0;           // the first source column the horizontal taps reach
  int cols = 0;           // elements of its intermediate rows: columns reached * channels
  int v_taps = 0, h_taps = 0;
};

// Device arrays, for `rows` samples.
struct ResampleTables {
  const ResampleSampleTaps* samples = nullptr;  // one per sample
  const int* v_first = nullptr;                 // out_h per sample: each output row's first source row
  const int* h_first = nullptr;                 // out_w per sample: each output column's first column, from x_lo
  const int16_t* weights = nullptr;             // Q15
};

struct ResampleShape {
  int64_t rows = 0;
  int channels = 0;
  int out_w = 0, out_h = 0;
  // The largest inter_stride of the samples (how wide the launch is).
  int max_inter_stride = 0;
};

constexpr int kResampleStrideAlign = 4;
// resample.h's kMostRoundedTaps (resample_run.cc checks that they agree).
constexpr int kResampleMostRoundedTaps = 64;

// Resamples `rows` images of `channels` channels, each where its
// ResampleSampleTaps puts it from `in`, to out_h x out_w x channels at `out`
// (dense, one after another), through `intermediate`: device memory for
// the int16 rows ResampleSampleTaps place there.
cudaError_t LaunchResample(const uint8_t* in, const ResampleShape& shape, const ResampleTables& tables,
                           int16_t* intermediate, uint8_t* out, cudaStream_t stream);

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_RESAMPLE_KERNELS_H_
