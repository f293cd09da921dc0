// Plain loops the compiler vectorizes: compiled once per SIMD target
// (Highway's foreach_target), so AVX2 and AVX-512 machines get wide vectors
// from a build with a portable baseline.
#include "sluice/ops/value_loops.h"

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sluice/ops/value_loops.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sluice::ops {
namespace HWY_NAMESPACE {
namespace {

template <typename T>
void ScaleOffsetLoop(const T* __restrict src, int64_t n, float scale, float offset, float* __restrict dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) * scale + offset;
}

template <typename T>
void PatternLoop(const T* __restrict src, int64_t n, const float* __restrict a, const float* __restrict b,
                 int64_t period, float* __restrict dst) {
  for (int64_t start = 0; start < n; start += period) {
    const int64_t len = std::min(period, n - start);
    const T* s = src + start;
    float* d = dst + start;
    for (int64_t i = 0; i < len; ++i) d[i] = static_cast<float>(s[i]) * a[i] + b[i];
  }
}

}  // namespace

void ScaleOffsetU8Impl(const uint8_t* src, int64_t n, float scale, float offset, float* dst) {
  ScaleOffsetLoop(src, n, scale, offset, dst);
}
void ScaleOffsetF32Impl(const float* src, int64_t n, float scale, float offset, float* dst) {
  ScaleOffsetLoop(src, n, scale, offset, dst);
}
void PatternU8Impl(const uint8_t* src, int64_t n, const float* a, const float* b, int64_t period, float* dst) {
  PatternLoop(src, n, a, b, period, dst);
}
void PatternF32Impl(const float* src, int64_t n, const float* a, const float* b, int64_t period, float* dst) {
  PatternLoop(src, n, a, b, period, dst);
}

}  // namespace HWY_NAMESPACE
}  // namespace sluice::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sluice::ops {

HWY_EXPORT(ScaleOffsetU8Impl);
HWY_EXPORT(ScaleOffsetF32Impl);
HWY_EXPORT(PatternU8Impl);
HWY_EXPORT(PatternF32Impl);

void ScaleOffset(const uint8_t* src, int64_t n, float scale, float offset, float* dst) {
  HWY_DYNAMIC_DISPATCH(ScaleOffsetU8Impl)(src, n, scale, offset, dst);
}
void ScaleOffset(const float* src, int64_t n, float scale, float offset, float* dst) {
  HWY_DYNAMIC_DISPATCH(ScaleOffsetF32Impl)(src, n, scale, offset, dst);
}
void ScaleOffsetPattern(const uint8_t* src, int64_t n, const float* a, const float* b, int64_t period, float* dst) {
  HWY_DYNAMIC_DISPATCH(PatternU8Impl)(src, n, a, b, period, dst);
}
void ScaleOffsetPattern(const float* src, int64_t n, const float* a, const float* b, int64_t period, float* dst) {
  HWY_DYNAMIC_DISPATCH(PatternF32Impl)(src, n, a, b, period, dst);
}

}  // namespace sluice::ops
#endif  // HWY_ONCE
