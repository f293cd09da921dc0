// Compiled once per SIMD target (SSE4, AVX2, AVX-512) with Highway's
// foreach_target; the best the CPU has is chosen at run time
// (HWY_DYNAMIC_DISPATCH), so one build runs at full speed on any x86.
#include "sluice/ops/row_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sluice/ops/row_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sluice::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// A row's last, partial vector: AVX2 and AVX-512 mask the load and store
// in hardware; older targets emulate the masks with whole-vector accesses,
// which would touch memory past the row, so they go through a buffer.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
constexpr bool kHardwareMasks = true;
#else
constexpr bool kHardwareMasks = false;
#endif

inline V Load(const float* p, int64_t count) {
  const D d;
  if (count == static_cast<int64_t>(hn::Lanes(d))) return hn::LoadU(d, p);
  if (kHardwareMasks) return hn::MaskedLoad(hn::FirstN(d, static_cast<size_t>(count)), d, p);
  alignas(64) float buf[64] = {};
  std::memcpy(buf, p, static_cast<size_t>(count) * sizeof(float));
  return hn::LoadU(d, buf);
}

inline void Store(V v, float* p, int64_t count) {
  const D d;
  if (count == static_cast<int64_t>(hn::Lanes(d))) return hn::StoreU(v, d, p);
  if (kHardwareMasks) return hn::BlendedStore(v, hn::FirstN(d, static_cast<size_t>(count)), d, p);
  alignas(64) float buf[64];
  hn::StoreU(v, d, buf);
  std::memcpy(p, buf, static_cast<size_t>(count) * sizeof(float));
}

// Output row r at position i reduces k operands: operand(r, j) + i, tap j.
// kSum: sum of w[j] * operand; otherwise the max of the operands.
template <bool kSum, typename Operand>
inline void Reduce(int64_t rows, int64_t n, const float* w, int64_t k, Operand operand,
                   float* const* dst) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto first = [&](const float* p, int64_t c) {
    return kSum ? hn::Mul(hn::Set(d, w[0]), Load(p, c)) : Load(p, c);
  };
  auto add = [&](V acc, int64_t j, const float* p, int64_t c) {
    return kSum ? hn::MulAdd(hn::Set(d, w[j]), Load(p, c), acc) : hn::Max(acc, Load(p, c));
  };
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    for (int64_t i = 0; i < n; i += lanes) {
      const int64_t c = std::min(lanes, n - i);
      V a0 = first(operand(r, 0) + i, c), a1 = first(operand(r + 1, 0) + i, c);
      V a2 = first(operand(r + 2, 0) + i, c), a3 = first(operand(r + 3, 0) + i, c);
      for (int64_t j = 1; j < k; ++j) {
        a0 = add(a0, j, operand(r, j) + i, c);
        a1 = add(a1, j, operand(r + 1, j) + i, c);
        a2 = add(a2, j, operand(r + 2, j) + i, c);
        a3 = add(a3, j, operand(r + 3, j) + i, c);
      }
      Store(a0, dst[r] + i, c);
      Store(a1, dst[r + 1] + i, c);
      Store(a2, dst[r + 2] + i, c);
      Store(a3, dst[r + 3] + i, c);
    }
  }
  for (; r < rows; ++r) {
    for (int64_t i = 0; i < n; i += lanes) {
      const int64_t c = std::min(lanes, n - i);
      V a = first(operand(r, 0) + i, c);
      for (int64_t j = 1; j < k; ++j) a = add(a, j, operand(r, j) + i, c);
      Store(a, dst[r] + i, c);
    }
  }
}

}  // namespace

void ConvolveRowsImpl(const float* const* src, float* const* dst, int64_t rows, int64_t n,
                      int64_t step, const float* w, int64_t k) {
  Reduce<true>(rows, n, w, k, [&](int64_t r, int64_t j) { return src[r] + j * step; }, dst);
}

void WeightedSumRowsImpl(const float* const* window, float* const* dst, int64_t rows, int64_t n,
                         const float* w, int64_t k) {
  Reduce<true>(rows, n, w, k, [&](int64_t r, int64_t j) { return window[r + j]; }, dst);
}

void MaxRowsImpl(const float* const* src, float* const* dst, int64_t rows, int64_t n, int64_t step,
                 int64_t k) {
  Reduce<false>(rows, n, nullptr, k, [&](int64_t r, int64_t j) { return src[r] + j * step; }, dst);
}

void MaxWindowRowsImpl(const float* const* window, float* const* dst, int64_t rows, int64_t n,
                       int64_t k) {
  Reduce<false>(rows, n, nullptr, k, [&](int64_t r, int64_t j) { return window[r + j]; }, dst);
}

void U8ToFloatImpl(const uint8_t* src, int64_t n, float* dst) {
  const D d;
  const hn::Rebind<uint8_t, D> du8;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::ConvertTo(d, hn::PromoteTo(hn::RebindToSigned<D>(), hn::LoadU(du8, src + i))), d, dst + i);
  for (; i < n; ++i) dst[i] = src[i];
}

void FloatToU8Impl(const float* src, int64_t n, uint8_t* dst) {
  const D d;
  const hn::Rebind<uint8_t, D> du8;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    // NearestInt rounds ties to even; DemoteTo saturates to [0, 255].
    hn::StoreU(hn::DemoteTo(du8, hn::NearestInt(hn::LoadU(d, src + i))), du8, dst + i);
  }
  for (; i < n; ++i) {
    const float v = std::min(std::max(src[i], 0.f), 255.f);
    dst[i] = static_cast<uint8_t>(std::nearbyint(v));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sluice::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sluice::ops {

HWY_EXPORT(ConvolveRowsImpl);
HWY_EXPORT(WeightedSumRowsImpl);
HWY_EXPORT(MaxRowsImpl);
HWY_EXPORT(MaxWindowRowsImpl);
HWY_EXPORT(U8ToFloatImpl);
HWY_EXPORT(FloatToU8Impl);

void ConvolveRows(const float* const* src, float* const* dst, int64_t rows, int64_t n, int64_t step, const float* w,
                  int64_t k) {
  HWY_DYNAMIC_DISPATCH(ConvolveRowsImpl)(src, dst, rows, n, step, w, k);
}

void WeightedSumRows(const float* const* window, float* const* dst, int64_t rows, int64_t n, const float* w,
                     int64_t k) {
  HWY_DYNAMIC_DISPATCH(WeightedSumRowsImpl)(window, dst, rows, n, w, k);
}

void MaxRows(const float* const* src, float* const* dst, int64_t rows, int64_t n, int64_t step, int64_t k) {
  HWY_DYNAMIC_DISPATCH(MaxRowsImpl)(src, dst, rows, n, step, k);
}

void MaxWindowRows(const float* const* window, float* const* dst, int64_t rows, int64_t n, int64_t k) {
  HWY_DYNAMIC_DISPATCH(MaxWindowRowsImpl)(window, dst, rows, n, k);
}

void U8ToFloat(const uint8_t* src, int64_t n, float* dst) { HWY_DYNAMIC_DISPATCH(U8ToFloatImpl)(src, n, dst); }

void FloatToU8(const float* src, int64_t n, uint8_t* dst) { HWY_DYNAMIC_DISPATCH(FloatToU8Impl)(src, n, dst); }

}  // namespace sluice::ops
#endif  // HWY_ONCE
