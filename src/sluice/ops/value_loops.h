// The element-wise loops of the value ops (rescale, normalize), compiled
// once per SIMD target and chosen at run time: at the portable baseline
// the compiler would vectorize them for SSE only.
#ifndef SLUICE_OPS_VALUE_LOOPS_H_
#define SLUICE_OPS_VALUE_LOOPS_H_

#include <cstdint>

namespace sluice::ops {

// dst[i] = src[i] * scale + offset for i < n.
void ScaleOffset(const uint8_t* src, int64_t n, float scale, float offset, float* dst);
void ScaleOffset(const float* src, int64_t n, float scale, float offset, float* dst);

// dst[i] = src[i] * a[i % period] + b[i % period] for i < n, `period`
// values at a and b (whole periods of a channel pattern).
void ScaleOffsetPattern(const uint8_t* src, int64_t n, const float* a, const float* b, int64_t period, float* dst);
void ScaleOffsetPattern(const float* src, int64_t n, const float* a, const float* b, int64_t period, float* dst);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_VALUE_LOOPS_H_
