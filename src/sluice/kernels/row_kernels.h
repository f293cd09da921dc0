// Vectorized inner loops of the separable filters. Each call computes many
// output rows, several vectors at a time (rows at a position, or positions
// of a row): their accumulators are independent, which hides the FMA
// latency that a single row's chain of taps would expose (a loop per tap
// instead would round-trip partial sums through memory and stall on store
// forwarding).
#ifndef SLUICE_KERNELS_ROW_KERNELS_H_
#define SLUICE_KERNELS_ROW_KERNELS_H_

#include <cstdint>

namespace sluice::kernels {

// A float image's separable weighted sums, in whole vectors with no row
// pointers (small images spend more on a row's tail and its pointers than
// on the taps): dst[r * dst_stride + i] = sum_j w[j] * src[r * src_stride +
// i + j * step], for r < rows, i < n. Each row ends in a whole vector: it
// reads up to a vector past its last operand, and writes up to a vector past
// n (into the next row, computed after it, or slack the caller leaves), but
// for the last row when `exact_end` (the image's output). One row of
// rows * n values with step n is a vertical pass over rows held with their
// borders, one run of vectors over the whole image.
void ConvolveRows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows, int64_t n,
                  int64_t step, const float* w, int64_t k, bool exact_end);
// Each of `rows` float rows of n values at src + r * n, with its borders, to
// dst + r * stride: value i of the left border copies the row's value
// left[i], of the right border right[i]. Writes up to a vector past the
// right border; reads the rows' values only.
void PadRows(const float* src, int64_t rows, int64_t n, const int32_t* left, int64_t left_count, const int32_t* right,
             int64_t right_count, float* dst, int64_t stride);
// The max of a row's k operands (horizontal) and of k rows of a window
// (vertical), as float (dilation); `window` holds rows + k - 1 row pointers
// (with the border rows already resolved).
void MaxRows(const float* const* src, float* const* dst, int64_t rows, int64_t n, int64_t step, int64_t k);
void MaxWindowRows(const float* const* window, float* const* dst, int64_t rows, int64_t n, int64_t k);

// uint8 images are filtered in 16-bit fixed point, exactly where they take
// the max, and within 0.1 of the exact weighted sum where they blur, which
// rounds to the same level but for values that close to a half: 16 lanes
// where float has 8, and no conversions. A value v is held as v << 7 in an
// int16, a tap w as round(w * 32768) (Q15).
constexpr int kFixedValueShift = 7;
// The integer passes read their src/window rows, and write the dst rows of
// the horizontal pass, up to this many bytes past n: scratch rows leave that
// much slack. The final passes write their uint8 dst rows exactly.
constexpr int64_t kRowSlackBytes = 64;

// dst[i] = src[i] << kFixedValueShift.
void U8ToFixed(const uint8_t* src, int64_t n, int16_t* dst);
// The passes above in fixed point; the vertical one rounds to uint8.
void ConvolveRows(const int16_t* const* src, int16_t* const* dst, int64_t rows, int64_t n, int64_t step,
                  const int16_t* w, int64_t k);
void WeightedSumRows(const int16_t* const* window, uint8_t* const* dst, int64_t rows, int64_t n, const int16_t* w,
                     int64_t k);
void MaxRows(const uint8_t* const* src, uint8_t* const* dst, int64_t rows, int64_t n, int64_t step, int64_t k);
void MaxWindowRows(const uint8_t* const* window, uint8_t* const* dst, int64_t rows, int64_t n, int64_t k);

// A uint8 row's borders as byte shuffles of its first and last 16 bytes:
// left[i] (i < left_count) indexes the first 16, right[i] the last 16, and
// an index with the top bit set gives 0.
struct BorderShuffle {
  uint8_t left[16], right[16];
  int64_t left_count, right_count;
};
// Each of `rows` rows of n >= 16 bytes at src + r * n, with its borders, to
// dst + r * stride; writes up to 16 bytes past the right border.
void PadRows(const uint8_t* src, int64_t rows, int64_t n, const BorderShuffle& borders, uint8_t* dst, int64_t stride);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_ROW_KERNELS_H_
