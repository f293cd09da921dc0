// Resizing 8-bit HWC images as PIL and torchvision do: bilinear weights on
// a triangle whose width grows with the shrink factor (antialiasing), taken
// over a window of the source that may start and end between pixels (a
// crop), so crop-then-resize is one pass.
#ifndef SLUICE_OPS_RESAMPLE_H_
#define SLUICE_OPS_RESAMPLE_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

#include "sluice/ops/image_decoder.h"

namespace sluice::ops {

// Resizes `window` of `src` (src_w x src_h x channels, rows of src_stride
// bytes) to out_w x out_h x channels at `dst` (rows of out_w * channels).
// Thread-safe (scratch is per thread).
void ResampleBilinear(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride,
                      const Window& window, uint8_t* dst, int out_w, int out_h);

// The same, handing each output row y to `row(y, values)` as out_w *
// channels floats holding the very levels ResampleBilinear writes (rounded,
// within [0, 255]), for a consumer that writes them on in its own format.
void ResampleBilinearRows(const uint8_t* src, int src_w, int src_h, int channels, int64_t src_stride,
                          const Window& window, int out_w, int out_h,
                          absl::FunctionRef<void(int y, const float* values)> row);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_RESAMPLE_H_
