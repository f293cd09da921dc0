// Vectorized inner loops of the separable filters. Each call computes many
// output rows, four at a time per vector position: the four accumulators are
// independent, which hides the FMA latency that a single row's chain of taps
// would expose (a loop per tap instead would round-trip partial sums through
// memory and stall on store forwarding).
#ifndef SLUICE_OPS_ROW_KERNELS_H_
#define SLUICE_OPS_ROW_KERNELS_H_

#include <cstdint>

namespace sluice::ops {

// Horizontal pass: dst[r][i] = sum_j w[j] * src[r][i + j * step], for
// r < rows, i < n.
void ConvolveRows(const float* const* src, float* const* dst, int64_t rows, int64_t n,
                  int64_t step, const float* w, int64_t k);
// Vertical pass: dst[r][i] = sum_j w[j] * window[r + j][i]; `window` holds
// rows + k - 1 row pointers (with the border rows already resolved).
void WeightedSumRows(const float* const* window, float* const* dst, int64_t rows, int64_t n,
                     const float* w, int64_t k);
// The same two passes with max instead of a weighted sum (dilation).
void MaxRows(const float* const* src, float* const* dst, int64_t rows, int64_t n, int64_t step,
             int64_t k);
void MaxWindowRows(const float* const* window, float* const* dst, int64_t rows, int64_t n,
                   int64_t k);

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
void WeightedSumRows(const int16_t* const* window, uint8_t* const* dst, int64_t rows, int64_t n,
                     const int16_t* w, int64_t k);
void MaxRows(const uint8_t* const* src, uint8_t* const* dst, int64_t rows, int64_t n, int64_t step,
             int64_t k);
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
void PadRows(const uint8_t* src, int64_t rows, int64_t n, const BorderShuffle& borders, uint8_t* dst,
             int64_t stride);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_ROW_KERNELS_H_
