// De-interleaving is compiled once per SIMD target (Highway's
// foreach_target) and the best the CPU has is chosen at run time. A memcpy
// of each element, as this op first did, took 4.5 us a 32x32x3 float image
// on the Xeon of bench/RESULTS.md.
#include "sluice/kernels/layout.h"

#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sluice/kernels/layout.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sluice::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

// Any channel count, one element at a time.
template <typename T>
void ToPlanes(int64_t pixels, int64_t c, const T* src, T* dst) {
  for (int64_t ch = 0; ch < c; ++ch) {
    T* plane = dst + ch * pixels;
    for (int64_t p = 0; p < pixels; ++p) plane[p] = src[p * c + ch];
  }
}

// Three channels: a vector of pixels de-interleaved per step.
template <typename T>
void ThreePlanes(int64_t pixels, const T* src, T* dst) {
  const hn::ScalableTag<T> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  T* r = dst;
  T* g = dst + pixels;
  T* b = dst + 2 * pixels;
  int64_t p = 0;
  for (; p + lanes <= pixels; p += lanes) {
    hn::Vec<decltype(d)> v0, v1, v2;
    hn::LoadInterleaved3(d, src + 3 * p, v0, v1, v2);
    hn::StoreU(v0, d, r + p);
    hn::StoreU(v1, d, g + p);
    hn::StoreU(v2, d, b + p);
  }
  for (; p < pixels; ++p) r[p] = src[3 * p], g[p] = src[3 * p + 1], b[p] = src[3 * p + 2];
}

template <typename T>
void Typed(const ImageDims& d, const uint8_t* src, uint8_t* dst) {
  const int64_t pixels = d.h * d.w;
  const T* in = reinterpret_cast<const T*>(src);
  T* out = reinterpret_cast<T*>(dst);
  if constexpr (sizeof(T) == 1 || sizeof(T) == 4) {
    if (d.c == 3) return ThreePlanes(pixels, in, out);
  }
  ToPlanes(pixels, d.c, in, out);
}

}  // namespace

void HwcToChwImpl(const ImageDims& d, size_t elem_bytes, const uint8_t* src, uint8_t* dst) {
  if (d.c == 1) {
    std::memcpy(dst, src, static_cast<size_t>(d.h * d.w) * elem_bytes);
    return;
  }
  switch (elem_bytes) {
    case 1:
      return Typed<uint8_t>(d, src, dst);
    case 2:
      return Typed<uint16_t>(d, src, dst);
    case 4:
      return Typed<uint32_t>(d, src, dst);
    default:
      return Typed<uint64_t>(d, src, dst);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sluice::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sluice::kernels {
namespace {

template <size_t kBytes>
void MirrorFixed(const uint8_t* src, int64_t w, uint8_t* dst) {
  for (int64_t x = 0; x < w; ++x) std::memcpy(dst + x * kBytes, src + (w - 1 - x) * kBytes, kBytes);
}

}  // namespace

void MirrorRow(const uint8_t* src, int64_t w, size_t pixel_bytes, uint8_t* dst) {
  switch (pixel_bytes) {
    case 1:
      return MirrorFixed<1>(src, w, dst);
    case 2:
      return MirrorFixed<2>(src, w, dst);
    case 3:
      return MirrorFixed<3>(src, w, dst);
    case 4:
      return MirrorFixed<4>(src, w, dst);
    case 6:
      return MirrorFixed<6>(src, w, dst);
    case 8:
      return MirrorFixed<8>(src, w, dst);
    case 12:
      return MirrorFixed<12>(src, w, dst);
    case 16:
      return MirrorFixed<16>(src, w, dst);
    default:
      for (int64_t x = 0; x < w; ++x) std::memcpy(dst + x * pixel_bytes, src + (w - 1 - x) * pixel_bytes, pixel_bytes);
  }
}

HWY_EXPORT(HwcToChwImpl);

void HwcToChw(const ImageDims& d, size_t elem_bytes, const uint8_t* src, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(HwcToChwImpl)(d, elem_bytes, src, dst);
}

}  // namespace sluice::kernels
#endif  // HWY_ONCE
