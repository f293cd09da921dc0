// Plain loops the compiler vectorizes: compiled once per SIMD target
// (Highway's foreach_target), so AVX2 and AVX-512 machines get wide vectors
// from a build with a portable baseline.
#include "sluice/kernels/value_loops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "sluice/kernels/value_loops.cc"
#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sluice::kernels {
namespace HWY_NAMESPACE {
namespace {

template <typename T>
void ScaleOffsetLoop(const T* __restrict src, int64_t n, float scale, float offset, float* __restrict dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) * scale + offset;
}

// Element i takes a[(phase + i) % period], b[...].
template <typename T>
void PatternLoop(const T* __restrict src, int64_t n, const float* __restrict a, const float* __restrict b,
                 int64_t period, int64_t phase, float* __restrict dst) {
  for (int64_t start = 0; start < n;) {
    const int64_t len = std::min(period - phase, n - start);
    const T* s = src + start;
    float* d = dst + start;
    const float* pa = a + phase;
    const float* pb = b + phase;
    for (int64_t i = 0; i < len; ++i) d[i] = static_cast<float>(s[i]) * pa[i] + pb[i];
    start += len;
    phase = 0;
  }
}

// dst may be a (in place): each element is read before it is written.
void BlendLoop(const float* a, float wa, const float* __restrict b, float wb, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = b[i] * wb + a[i] * wa;
}

namespace hn = hwy::HWY_NAMESPACE;

// How many of the n values at dst come before its first vector-aligned
// address, which a non-temporal store needs.
template <typename T>
int64_t UnalignedHead(const T* dst, int64_t n) {
  const int64_t vector_bytes = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<T>()) * sizeof(T));
  const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) % vector_bytes);
  return std::min<int64_t>(n, misaligned == 0 ? 0 : (vector_bytes - misaligned) / static_cast<int64_t>(sizeof(T)));
}

// Writes n floats to dst with non-temporal stores, past the caches:
// `loop(i, len, out)` computes elements [i, i + len) into `out`, a block
// that stays in L1, whose vectors are then streamed out. The values are
// the loop's own; only how they reach memory differs. Floats before dst's
// first vector-aligned address, and the tail, are stored as usual.
template <typename Loop>
void Streamed(int64_t n, float* dst, Loop loop) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t head = UnalignedHead(dst, n);
  if (head > 0) loop(0, head, dst);
  constexpr int64_t kBlock = 2048;  // 8 KiB of floats
  HWY_ALIGN float block[kBlock];
  for (int64_t i = head; i < n; i += kBlock) {
    const int64_t len = std::min(kBlock, n - i);
    const int64_t vectors = len / lanes * lanes;
    loop(i, vectors, block);
    for (int64_t j = 0; j < vectors; j += lanes) hn::Stream(hn::Load(d, block + j), d, dst + i + j);
    if (vectors < len) loop(i + vectors, len - vectors, dst + i + vectors);
  }
  hwy::FlushStream();
}

// `loop` over [0, n) into dst, past the caches when `bypass`.
template <typename Loop>
void Write(bool bypass, int64_t n, float* dst, Loop loop) {
  if (bypass) return Streamed(n, dst, loop);
  loop(0, n, dst);
}

}  // namespace

template <typename T>
void ScaleOffsetAny(const T* src, int64_t n, float scale, float offset, float* dst, bool bypass) {
  Write(bypass, n, dst, [&](int64_t i, int64_t len, float* out) { ScaleOffsetLoop(src + i, len, scale, offset, out); });
}
template <typename T>
void PatternAny(const T* src, int64_t n, const float* a, const float* b, int64_t period, float* dst, bool bypass) {
  Write(bypass, n, dst,
        [&](int64_t i, int64_t len, float* out) { PatternLoop(src + i, len, a, b, period, i % period, out); });
}

void ScaleOffsetU8Impl(const uint8_t* src, int64_t n, float scale, float offset, float* dst, bool bypass) {
  ScaleOffsetAny(src, n, scale, offset, dst, bypass);
}
void ScaleOffsetF32Impl(const float* src, int64_t n, float scale, float offset, float* dst, bool bypass) {
  ScaleOffsetAny(src, n, scale, offset, dst, bypass);
}
void PatternU8Impl(const uint8_t* src, int64_t n, const float* a, const float* b, int64_t period, float* dst,
                   bool bypass) {
  PatternAny(src, n, a, b, period, dst, bypass);
}
void PatternF32Impl(const float* src, int64_t n, const float* a, const float* b, int64_t period, float* dst,
                    bool bypass) {
  PatternAny(src, n, a, b, period, dst, bypass);
}

void BlendImpl(const float* a, float wa, const float* b, float wb, int64_t n, float* dst, bool bypass) {
  Write(bypass, n, dst, [&](int64_t i, int64_t len, float* out) { BlendLoop(a + i, wa, b + i, wb, len, out); });
}

void StreamBytesImpl(const uint8_t* src, int64_t n, uint8_t* dst) {
  const hn::ScalableTag<uint8_t> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = UnalignedHead(dst, n);
  std::copy_n(src, i, dst);
  for (; i + lanes <= n; i += lanes) hn::Stream(hn::LoadU(d, src + i), d, dst + i);
  std::copy_n(src + i, n - i, dst + i);
}

}  // namespace HWY_NAMESPACE
}  // namespace sluice::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sluice::kernels {

HWY_EXPORT(ScaleOffsetU8Impl);
HWY_EXPORT(ScaleOffsetF32Impl);
HWY_EXPORT(PatternU8Impl);
HWY_EXPORT(PatternF32Impl);
HWY_EXPORT(BlendImpl);
HWY_EXPORT(StreamBytesImpl);

void ScaleOffset(const uint8_t* src, int64_t n, float scale, float offset, float* dst, bool bypass_cache) {
  HWY_DYNAMIC_DISPATCH(ScaleOffsetU8Impl)(src, n, scale, offset, dst, bypass_cache);
}
void ScaleOffset(const float* src, int64_t n, float scale, float offset, float* dst, bool bypass_cache) {
  HWY_DYNAMIC_DISPATCH(ScaleOffsetF32Impl)(src, n, scale, offset, dst, bypass_cache);
}
void ScaleOffsetPattern(const uint8_t* src, int64_t n, const float* a, const float* b, int64_t period, float* dst,
                        bool bypass_cache) {
  HWY_DYNAMIC_DISPATCH(PatternU8Impl)(src, n, a, b, period, dst, bypass_cache);
}
void ScaleOffsetPattern(const float* src, int64_t n, const float* a, const float* b, int64_t period, float* dst,
                        bool bypass_cache) {
  HWY_DYNAMIC_DISPATCH(PatternF32Impl)(src, n, a, b, period, dst, bypass_cache);
}

void Blend(const float* a, float wa, const float* b, float wb, int64_t n, float* dst, bool bypass_cache) {
  HWY_DYNAMIC_DISPATCH(BlendImpl)(a, wa, b, wb, n, dst, bypass_cache);
}

SampleWriter::~SampleWriter() {
  if (bypass_cache_) hwy::FlushStream();
}

void CopyBypassingCache(void* dst, const void* src, size_t n) {
  // Below this a copy's lines fit the L2 cache: whoever reads them next
  // gains from finding them there.
  constexpr size_t kStreamFrom = 256 << 10;
  if (n < kStreamFrom) {
    std::memcpy(dst, src, n);
    return;
  }
  HWY_DYNAMIC_DISPATCH(StreamBytesImpl)(static_cast<const uint8_t*>(src), static_cast<int64_t>(n),
                                        static_cast<uint8_t*>(dst));
  hwy::FlushStream();
}

void SampleWriter::Stream(const uint8_t* src, int64_t n, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(StreamBytesImpl)(src, n, dst);
}

uint8_t* SampleWriter::Scratch(int64_t bytes) {
  thread_local std::vector<uint8_t> scratch;
  if (static_cast<int64_t>(scratch.size()) < bytes) scratch.resize(bytes);
  return scratch.data();
}

}  // namespace sluice::kernels
#endif  // HWY_ONCE
