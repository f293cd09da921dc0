// Compiled once per SIMD target (SSE4, AVX2, AVX-512) with Highway's
// foreach_target; the best the CPU has is chosen at run time
// (HWY_DYNAMIC_DISPATCH), so one build runs at full speed on any x86.
#include "sluice/kernels/row_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sluice/kernels/row_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sluice::kernels {
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
inline void ReduceRows(D d, int64_t rows, int64_t n, int64_t k, Operand operand, First first, Add add, StoreRow store) {
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

// The max of float rows.
template <typename Operand>
inline void MaxOfFloatRows(int64_t rows, int64_t n, int64_t k, Operand operand, float* const* dst) {
  const D d;
  ReduceRows(
      d, rows, n, k, operand, [&](const float* p, int64_t c) { return Load(p, c); },
      [&](V acc, int64_t, const float* p, int64_t c) { return hn::Max(acc, Load(p, c)); },
      [&](V v, int64_t r, int64_t i, int64_t c) { Store(v, dst[r] + i, c); });
}

// Vectors v < kCount of rows r < kRows of sum_j w[j] * src[r * src_stride +
// v * lanes + j * step], stored at dst + r * dst_stride + v * lanes: whole
// vectors, but the rows' last vectors stop `last` lanes past the start of
// the last row's last (a vector wider than a row reaches rows further).
// Eight accumulators keep both FMA units busy through their latency.
template <int kRows, int kCount>
inline void WeightedSumBlock(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t step,
                             const float* w, int64_t k, int64_t last) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V a[kRows][kCount];
  const V w0 = hn::Set(d, w[0]);
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kCount; ++v) a[r][v] = hn::Mul(w0, hn::LoadU(d, src + r * src_stride + v * lanes));
  }
  for (int64_t j = 1; j < k; ++j) {
    src += step;
    const V wj = hn::Set(d, w[j]);
    for (int r = 0; r < kRows; ++r) {
      for (int v = 0; v < kCount; ++v) {
        a[r][v] = hn::MulAdd(wj, hn::LoadU(d, src + r * src_stride + v * lanes), a[r][v]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    const int64_t row_last = std::min(lanes, last + (kRows - 1 - r) * dst_stride);
    for (int v = 0; v < kCount; ++v) {
      Store(a[r][v], dst + r * dst_stride + v * lanes, v == kCount - 1 ? row_last : lanes);
    }
  }
}

// Calls f(std::integral_constant<int, count>) for count in 1..7.
template <typename F>
inline void WithCount(int64_t count, F f) {
  switch (count) {
    case 1:
      return f(std::integral_constant<int, 1>());
    case 2:
      return f(std::integral_constant<int, 2>());
    case 3:
      return f(std::integral_constant<int, 3>());
    case 4:
      return f(std::integral_constant<int, 4>());
    case 5:
      return f(std::integral_constant<int, 5>());
    case 6:
      return f(std::integral_constant<int, 6>());
    case 7:
      return f(std::integral_constant<int, 7>());
    default:
      return;
  }
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
inline void FixedSumOfRows(int64_t rows, int64_t n, const int16_t* w, int64_t k, Operand operand, Finish finish) {
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

void ConvolveRowsImpl(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows, int64_t n,
                      int64_t step, const float* w, int64_t k, bool exact_end) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(D()));
  const int64_t vectors = (n + lanes - 1) / lanes;
  // One past the output's last value, which `exact_end` must not write past.
  const int64_t end = (rows - 1) * dst_stride + n;
  // Rows r .. r + kRows - 1 in blocks of kBlock / kRows vectors, from the
  // last: a row's last vector writes past the row into the next one's first
  // values, which must be written after it.
  auto run_rows = [&](auto rows_tag, int64_t r) {
    constexpr int kRows = decltype(rows_tag)::value, kBlock = 8 / kRows;
    const float* in = src + r * src_stride;
    float* out = dst + r * dst_stride;
    // With `exact_end`, no store past the output's end: the last row stops
    // at its tail and, where a vector is wider than a row (16 lanes, rows of
    // 5), the rows before it stop there too; never short of their own values.
    const int64_t last =
        exact_end ? std::min(lanes, end - ((r + kRows - 1) * dst_stride + (vectors - 1) * lanes)) : lanes;
    int64_t v = vectors - vectors % kBlock;
    WithCount(vectors % kBlock, [&](auto count) {
      WeightedSumBlock<kRows, decltype(count)::value>(in + v * lanes, src_stride, out + v * lanes, dst_stride, step, w,
                                                      k, last);
    });
    while (v > 0) {
      v -= kBlock;
      WeightedSumBlock<kRows, kBlock>(in + v * lanes, src_stride, out + v * lanes, dst_stride, step, w, k,
                                      v + kBlock == vectors ? last : lanes);
    }
  };
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) run_rows(std::integral_constant<int, 2>(), r);
  if (r < rows) run_rows(std::integral_constant<int, 1>(), r);
}

void MaxRowsImpl(const float* const* src, float* const* dst, int64_t rows, int64_t n, int64_t step, int64_t k) {
  MaxOfFloatRows(rows, n, k, [&](int64_t r, int64_t j) { return src[r] + j * step; }, dst);
}

void MaxWindowRowsImpl(const float* const* window, float* const* dst, int64_t rows, int64_t n, int64_t k) {
  MaxOfFloatRows(rows, n, k, [&](int64_t r, int64_t j) { return window[r + j]; }, dst);
}

void PadFloatRowsImpl(const float* src, int64_t rows, int64_t n, const int32_t* left, int64_t left_count,
                      const int32_t* right, int64_t right_count, float* dst, int64_t stride) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  // Borders whose values lie in the row's first and last vector are lane
  // permutations of those: a load, a permutation and a store each.
  bool permute = n >= lanes && left_count <= lanes && right_count <= lanes;
  alignas(64) int32_t left_lanes[hn::MaxLanes(d)] = {}, right_lanes[hn::MaxLanes(d)] = {};
  for (int64_t i = 0; permute && i < left_count; ++i) {
    permute = left[i] < lanes;
    left_lanes[i] = left[i];
  }
  for (int64_t i = 0; permute && i < right_count; ++i) {
    permute = right[i] >= n - lanes;
    right_lanes[i] = static_cast<int32_t>(right[i] - (n - lanes));
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * n;
    float* out = dst + r * stride;
    if (!permute) {
      for (int64_t i = 0; i < left_count; ++i) out[i] = in[left[i]];
      std::copy_n(in, n, out + left_count);
      for (int64_t i = 0; i < right_count; ++i) out[left_count + n + i] = in[right[i]];
      continue;
    }
    const V first = hn::LoadU(d, in), final = hn::LoadU(d, in + n - lanes);
    // The left border's spare lanes land where the row's values go after.
    hn::StoreU(hn::TableLookupLanes(first, hn::SetTableIndices(d, left_lanes)), d, out);
    float* row = out + left_count;
    for (int64_t i = 0; i + lanes < n; i += lanes) hn::StoreU(hn::LoadU(d, in + i), d, row + i);
    hn::StoreU(final, d, row + n - lanes);
    hn::StoreU(hn::TableLookupLanes(final, hn::SetTableIndices(d, right_lanes)), d, row + n);
  }
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
  FixedSumOfRows(
      rows, n, w, k, [&](int64_t r, int64_t j) { return src[r] + j * step; },
      [&](hn::Vec<decltype(d)> v, int64_t r, int64_t i, int64_t) { hn::StoreU(v, d, dst[r] + i); });
}

void WeightedSumRowsFixedImpl(const int16_t* const* window, uint8_t* const* dst, int64_t rows, int64_t n,
                              const int16_t* w, int64_t k) {
  const hn::ScalableTag<int16_t> d;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const auto half = hn::Set(d, int16_t{1 << (kFixedValueShift - 1)});
  FixedSumOfRows(
      rows, n, w, k, [&](int64_t r, int64_t j) { return window[r + j]; },
      [&](hn::Vec<decltype(d)> v, int64_t r, int64_t i, int64_t c) {
        // Rounded to the nearest level (halves up); DemoteTo saturates.
        const auto level = hn::ShiftRight<kFixedValueShift>(hn::SaturatedAdd(v, half));
        StoreFirst(du8, hn::DemoteTo(du8, level), dst[r] + i, c);
      });
}

void MaxRowsU8Impl(const uint8_t* const* src, uint8_t* const* dst, int64_t rows, int64_t n, int64_t step, int64_t k) {
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
}  // namespace sluice::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sluice::kernels {

HWY_EXPORT(ConvolveRowsImpl);
HWY_EXPORT(MaxRowsImpl);
HWY_EXPORT(MaxWindowRowsImpl);
HWY_EXPORT(U8ToFixedImpl);
HWY_EXPORT(ConvolveRowsFixedImpl);
HWY_EXPORT(WeightedSumRowsFixedImpl);
HWY_EXPORT(MaxRowsU8Impl);
HWY_EXPORT(MaxWindowRowsU8Impl);
HWY_EXPORT(PadRowsImpl);
HWY_EXPORT(PadFloatRowsImpl);

void ConvolveRows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows, int64_t n,
                  int64_t step, const float* w, int64_t k, bool exact_end) {
  HWY_DYNAMIC_DISPATCH(ConvolveRowsImpl)(src, src_stride, dst, dst_stride, rows, n, step, w, k, exact_end);
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

void PadRows(const uint8_t* src, int64_t rows, int64_t n, const BorderShuffle& borders, uint8_t* dst, int64_t stride) {
  HWY_DYNAMIC_DISPATCH(PadRowsImpl)(src, rows, n, borders, dst, stride);
}

void PadRows(const float* src, int64_t rows, int64_t n, const int32_t* left, int64_t left_count, const int32_t* right,
             int64_t right_count, float* dst, int64_t stride) {
  HWY_DYNAMIC_DISPATCH(PadFloatRowsImpl)(src, rows, n, left, left_count, right, right_count, dst, stride);
}

}  // namespace sluice::kernels
#endif  // HWY_ONCE
