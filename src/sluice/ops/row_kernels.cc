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

// Output row r at position i reduces k operands, operand(r, j) + i:
// first(p, count) starts the reduction, add(acc, j, p, count) takes operand
// j, store(v, r, i, count) writes the result (count < lanes at a row's end).
template <class D, class Operand, class First, class Add, class StoreRow>
inline void ReduceRows(D d, int64_t rows, int64_t n, int64_t k, Operand operand, First first, Add add,
                       StoreRow store) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    for (int64_t i = 0; i < n; i += lanes) {
      const int64_t c = std::min(lanes, n - i);
      auto a0 = first(operand(r, 0) + i, c), a1 = first(operand(r + 1, 0) + i, c);
      auto a2 = first(operand(r + 2, 0) + i, c), a3 = first(operand(r + 3, 0) + i, c);
      for (int64_t j = 1; j < k; ++j) {
        a0 = add(a0, j, operand(r, j) + i, c);
        a1 = add(a1, j, operand(r + 1, j) + i, c);
        a2 = add(a2, j, operand(r + 2, j) + i, c);
        a3 = add(a3, j, operand(r + 3, j) + i, c);
      }
      store(a0, r, i, c);
      store(a1, r + 1, i, c);
      store(a2, r + 2, i, c);
      store(a3, r + 3, i, c);
    }
  }
  for (; r < rows; ++r) {
    for (int64_t i = 0; i < n; i += lanes) {
      const int64_t c = std::min(lanes, n - i);
      auto a = first(operand(r, 0) + i, c);
      for (int64_t j = 1; j < k; ++j) a = add(a, j, operand(r, j) + i, c);
      store(a, r, i, c);
    }
  }
}

// Float rows: kSum, the sum of w[j] * operand; otherwise their max.
template <bool kSum, typename Operand>
inline void Reduce(int64_t rows, int64_t n, const float* w, int64_t k, Operand operand,
                   float* const* dst) {
  const D d;
  auto first = [&](const float* p, int64_t c) {
    return kSum ? hn::Mul(hn::Set(d, w[0]), Load(p, c)) : Load(p, c);
  };
  auto add = [&](V acc, int64_t j, const float* p, int64_t c) {
    return kSum ? hn::MulAdd(hn::Set(d, w[j]), Load(p, c), acc) : hn::Max(acc, Load(p, c));
  };
  ReduceRows(d, rows, n, k, operand, first, add,
             [&](V v, int64_t r, int64_t i, int64_t c) { Store(v, dst[r] + i, c); });
}

// Stores the first `count` lanes of v: all of them with one store, a row's
// last few through a buffer (integer lanes have no masked store on AVX2).
template <class DT, typename T>
inline void StoreFirst(DT d, hn::Vec<DT> v, T* p, int64_t count) {
  if (count == static_cast<int64_t>(hn::Lanes(d))) return hn::StoreU(v, d, p);
  alignas(64) T buf[64 / sizeof(T)];
  hn::StoreU(v, d, buf);
  std::memcpy(p, buf, static_cast<size_t>(count) * sizeof(T));
}

// The max of integer rows, whose operands may be read a vector past n.
template <typename T, typename Operand>
inline void MaxOfRows(int64_t rows, int64_t n, int64_t k, Operand operand, T* const* dst) {
  const hn::ScalableTag<T> d;
  using VT = hn::Vec<decltype(d)>;
  ReduceRows(
      d, rows, n, k, operand, [&](const T* p, int64_t) { return hn::LoadU(d, p); },
      [&](VT acc, int64_t, const T* p, int64_t) { return hn::Max(acc, hn::LoadU(d, p)); },
      [&](VT v, int64_t r, int64_t i, int64_t c) { StoreFirst(d, v, dst[r] + i, c); });
}

// Fixed-point rows: the saturated sum of operand * w[j] / 32768, each
// product rounded (pmulhrsw); `finish` turns the sum into what is stored.
template <typename Operand, typename Finish>
inline void FixedSumOfRows(int64_t rows, int64_t n, const int16_t* w, int64_t k, Operand operand,
                           Finish finish) {
  const hn::ScalableTag<int16_t> d;
  using VI = hn::Vec<decltype(d)>;
  ReduceRows(
      d, rows, n, k, operand,
      [&](const int16_t* p, int64_t) { return hn::MulFixedPoint15(hn::LoadU(d, p), hn::Set(d, w[0])); },
      [&](VI acc, int64_t j, const int16_t* p, int64_t) {
        return hn::SaturatedAdd(acc, hn::MulFixedPoint15(hn::LoadU(d, p), hn::Set(d, w[j])));
      },
      finish);
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

void U8ToFixedImpl(const uint8_t* src, int64_t n, int16_t* dst) {
  const hn::ScalableTag<int16_t> d;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::ShiftLeft<kFixedValueShift>(hn::PromoteTo(d, hn::LoadU(du8, src + i))), d, dst + i);
  }
  for (; i < n; ++i) dst[i] = static_cast<int16_t>(src[i] << kFixedValueShift);
}

void ConvolveRowsFixedImpl(const int16_t* const* src, int16_t* const* dst, int64_t rows, int64_t n, int64_t step,
                           const int16_t* w, int64_t k) {
  const hn::ScalableTag<int16_t> d;
  FixedSumOfRows(rows, n, w, k, [&](int64_t r, int64_t j) { return src[r] + j * step; },
                 [&](hn::Vec<decltype(d)> v, int64_t r, int64_t i, int64_t) { hn::StoreU(v, d, dst[r] + i); });
}

void WeightedSumRowsFixedImpl(const int16_t* const* window, uint8_t* const* dst, int64_t rows, int64_t n,
                              const int16_t* w, int64_t k) {
  const hn::ScalableTag<int16_t> d;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const auto half = hn::Set(d, int16_t{1 << (kFixedValueShift - 1)});
  FixedSumOfRows(rows, n, w, k, [&](int64_t r, int64_t j) { return window[r + j]; },
                 [&](hn::Vec<decltype(d)> v, int64_t r, int64_t i, int64_t c) {
                   // Rounded to the nearest level (halves up); DemoteTo saturates.
                   const auto level = hn::ShiftRight<kFixedValueShift>(hn::SaturatedAdd(v, half));
                   StoreFirst(du8, hn::DemoteTo(du8, level), dst[r] + i, c);
                 });
}

void MaxRowsU8Impl(const uint8_t* const* src, uint8_t* const* dst, int64_t rows, int64_t n, int64_t step,
                   int64_t k) {
  MaxOfRows<uint8_t>(rows, n, k, [&](int64_t r, int64_t j) { return src[r] + j * step; }, dst);
}

void MaxWindowRowsU8Impl(const uint8_t* const* window, uint8_t* const* dst, int64_t rows, int64_t n, int64_t k) {
  MaxOfRows<uint8_t>(rows, n, k, [&](int64_t r, int64_t j) { return window[r + j]; }, dst);
}

void PadRowsImpl(const uint8_t* src, int64_t rows, int64_t n, const BorderShuffle& borders, uint8_t* dst,
                 int64_t stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* in = src + r * n;
    uint8_t* out = dst + r * stride;
    uint8_t* right = out + borders.left_count + n;
#if HWY_TARGET == HWY_SCALAR
    for (int64_t i = 0; i < borders.left_count; ++i) out[i] = borders.left[i] & 0x80 ? 0 : in[borders.left[i]];
    for (int64_t i = 0; i < borders.right_count; ++i) {
      right[i] = borders.right[i] & 0x80 ? 0 : in[n - 16 + borders.right[i]];
    }
#else
    const hn::Full128<uint8_t> d;
    hn::StoreU(hn::TableLookupBytesOr0(hn::LoadU(d, in), hn::LoadU(d, borders.left)), d, out);
    hn::StoreU(hn::TableLookupBytesOr0(hn::LoadU(d, in + n - 16), hn::LoadU(d, borders.right)), d, right);
#endif
    std::memcpy(out + borders.left_count, in, static_cast<size_t>(n));
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
HWY_EXPORT(U8ToFixedImpl);
HWY_EXPORT(ConvolveRowsFixedImpl);
HWY_EXPORT(WeightedSumRowsFixedImpl);
HWY_EXPORT(MaxRowsU8Impl);
HWY_EXPORT(MaxWindowRowsU8Impl);
HWY_EXPORT(PadRowsImpl);

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

void U8ToFixed(const uint8_t* src, int64_t n, int16_t* dst) { HWY_DYNAMIC_DISPATCH(U8ToFixedImpl)(src, n, dst); }

void ConvolveRows(const int16_t* const* src, int16_t* const* dst, int64_t rows, int64_t n, int64_t step,
                  const int16_t* w, int64_t k) {
  HWY_DYNAMIC_DISPATCH(ConvolveRowsFixedImpl)(src, dst, rows, n, step, w, k);
}

void WeightedSumRows(const int16_t* const* window, uint8_t* const* dst, int64_t rows, int64_t n, const int16_t* w,
                     int64_t k) {
  HWY_DYNAMIC_DISPATCH(WeightedSumRowsFixedImpl)(window, dst, rows, n, w, k);
}

void MaxRows(const uint8_t* const* src, uint8_t* const* dst, int64_t rows, int64_t n, int64_t step, int64_t k) {
  HWY_DYNAMIC_DISPATCH(MaxRowsU8Impl)(src, dst, rows, n, step, k);
}

void MaxWindowRows(const uint8_t* const* window, uint8_t* const* dst, int64_t rows, int64_t n, int64_t k) {
  HWY_DYNAMIC_DISPATCH(MaxWindowRowsU8Impl)(window, dst, rows, n, k);
}

void PadRows(const uint8_t* src, int64_t rows, int64_t n, const BorderShuffle& borders, uint8_t* dst,
             int64_t stride) {
  HWY_DYNAMIC_DISPATCH(PadRowsImpl)(src, rows, n, borders, dst, stride);
}

}  // namespace sluice::ops
#endif  // HWY_ONCE
