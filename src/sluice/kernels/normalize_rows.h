// Rows of uint8 HWC images to their normalized output, CHW or HWC, float32,
// float16 or uint8, mirrored or not, in one pass: crop_mirror_normalize's
// arithmetic, also what a decode op hands its resampled rows to. Compiled
// once per SIMD target (Highway's foreach_target; AVX2 and AVX-512 take
// intrinsics paths); every path gives the same values.
#ifndef SLUICE_KERNELS_NORMALIZE_ROWS_H_
#define SLUICE_KERNELS_NORMALIZE_ROWS_H_

#include <cstdint>
#include <vector>

#include "sluice/core/dtype.h"

namespace sluice::kernels {

// What a normalized row needs: the sample's size, the output's dtype and
// layout, and a, b per channel. out[c][y][x] = a[c] * in[y][x'][c] + b[c]
// for an h x w x channels sample, x' mirrored or not; a * in + b is
// (in * scale - mean) / std.
struct NormalizeLayout {
  int64_t h, w, channels;
  DType out;
  bool chw;
  std::vector<float> a, b;

  // Where channel c of pixel (y, x) goes in the sample's output.
  int64_t Offset(int64_t c, int64_t y, int64_t x) const {
    return chw ? (c * h + y) * w + x : (y * w + x) * channels + c;
  }
};

// Writes row y of a sample, from w * channels values at `row` (HWC), into
// the sample's output at `dst`, x mirrored or not. uint8 output copies the
// levels (a and b are then 1 and 0).
void NormalizeRow(const NormalizeLayout& layout, const uint8_t* row, int64_t y, bool mirror, uint8_t* dst);
// Rows y0 .. y0 + n - 1 the same way, row y's values at rows + (y - y0) *
// stride: one call for a whole image.
void NormalizeRows(const NormalizeLayout& layout, const uint8_t* rows, int64_t stride, int64_t y0, int64_t n,
                   bool mirror, uint8_t* dst);
// The same from levels held channel by channel (0..255 as int16): channel
// c's w values at levels + c * channel_stride. Values identical to
// NormalizeRow's.
void NormalizePlanes(const NormalizeLayout& layout, const int16_t* levels, int64_t channel_stride, int64_t y,
                     bool mirror, uint8_t* dst);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_NORMALIZE_ROWS_H_
