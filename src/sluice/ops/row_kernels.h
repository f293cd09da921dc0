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

// dst[i] = src[i] as float.
void U8ToFloat(const uint8_t* src, int64_t n, float* dst);
// dst[i] = src[i] rounded to nearest (ties to even) and saturated to [0, 255].
void FloatToU8(const float* src, int64_t n, uint8_t* dst);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_ROW_KERNELS_H_
