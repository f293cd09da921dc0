// Resizing 8-bit HWC images as PIL and torchvision do: bilinear weights on
// a triangle whose width grows with the shrink factor (antialiasing), taken
// over a window of the source that may start and end between pixels (a
// crop), so crop-then-resize is one pass. Fixed-point arithmetic (Q15
// weights, 7 fractional bits between the passes), as Pillow's own.
#ifndef SLUICE_KERNELS_RESAMPLE_H_
#define SLUICE_KERNELS_RESAMPLE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "sluice/kernels/image_decoder.h"

namespace sluice::kernels {

// Resizes `window` of `src` (src_w x src_h x channels, rows of src_stride
// bytes) to out_w x out_h x channels at `dst` (rows of out_w * channels).
// Thread-safe (scratch is per thread).
void ResampleBilinear(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride, const Window& window,
                      uint8_t* dst, int out_w, int out_h);

// The same, handing each output row y to `row(y, levels, channel_stride)`
// channel by channel instead of writing it: channel c's out_w levels
// (0..255) start at levels + c * channel_stride. Valid during the call.
// For a consumer that writes planes (CHW) in its own format.
void ResampleBilinearPlanes(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride,
                            const Window& window, int out_w, int out_h,
                            absl::FunctionRef<void(int y, const int16_t* levels, int64_t channel_stride)> row);

namespace resample_internal {

// Fixed point, as Pillow-SIMD does: weights in Q15, values between the
// passes in Q7 (a level times 128) as int16, each tap's product rounded
// ((a * w + 2^14) >> 15, x86's pmulhrsw). Exposed so that the cuda
// resampler computes the same values from the same tables.
constexpr int kWeightOne = 1 << 15;
constexpr int kValueShift = 7;

// A pass over more taps than this (a shrink by more than ~32 times) sums
// the exact products in int32 and rounds once: each rounded product errs by
// up to half a Q7 unit, and over hundreds of taps the errors added up to
// levels, and past int16 at the top (a white image shrunk 400 times came
// out black).
constexpr int kMostRoundedTaps = 64;

// Taps of every output position: `taps` Q15 weights each (zero-padded),
// the first at source index first[i]. A fixed count lets the kernels run
// without per-pixel branches; first[i] + taps never passes the source, and
// first never decreases with i.
struct Taps {
  std::vector<int> first;
  std::vector<int16_t> weights;  // taps per output
  int taps = 0;
};

// PIL's precompute_coeffs for the bilinear (triangle) filter, over a
// window [start, start + extent) of a source of `size` pixels, to `out`
// positions; with `inside`, reading only the window's whole pixels (as
// resizing it after a crop does), else any of the source's. Thread-safe
// (scratch is per thread).
void MakeTaps(double start, double extent, int size, int out, bool inside, Taps* t);

}  // namespace resample_internal
}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_RESAMPLE_H_
