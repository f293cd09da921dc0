// The element-wise loops of the value ops (rescale, normalize, mixup), compiled
// once per SIMD target and chosen at run time: at the portable baseline
// the compiler would vectorize them for SSE only. And the copy past the
// caches that kernels writing a sample at a time use for bypass_cache.
#ifndef SLUICE_OPS_VALUE_LOOPS_H_
#define SLUICE_OPS_VALUE_LOOPS_H_

#include <cstdint>

namespace sluice::ops {

// dst[i] = src[i] * scale + offset for i < n. With `bypass_cache` dst is
// written with non-temporal stores (same values): for outputs that are
// written once and read much later, which would only evict what the
// caches hold.
void ScaleOffset(const uint8_t* src, int64_t n, float scale, float offset, float* dst, bool bypass_cache = false);
void ScaleOffset(const float* src, int64_t n, float scale, float offset, float* dst, bool bypass_cache = false);

// dst[i] = src[i] * a[i % period] + b[i % period] for i < n, `period`
// values at a and b (whole periods of a channel pattern).
void ScaleOffsetPattern(const uint8_t* src, int64_t n, const float* a, const float* b, int64_t period, float* dst,
                        bool bypass_cache = false);
void ScaleOffsetPattern(const float* src, int64_t n, const float* a, const float* b, int64_t period, float* dst,
                        bool bypass_cache = false);

// dst[i] = b[i] * wb + a[i] * wa for i < n (mixup's blend); dst may be a.
void Blend(const float* a, float wa, const float* b, float wb, int64_t n, float* dst, bool bypass_cache = false);

// n bytes from src to dst, written with non-temporal stores (past the
// caches).
void CopyPastCaches(const uint8_t* src, int64_t n, uint8_t* dst);

// Calls write(out) to produce one sample's `bytes` of output at dst: out
// is dst, or with `bypass_cache` (KernelContext's) per-thread scratch that
// stays in L1, copied to dst past the caches after. For kernels whose
// writes are not plain loops.
uint8_t* SampleScratch(int64_t bytes);
template <typename Write>
void WriteSample(bool bypass_cache, uint8_t* dst, int64_t bytes, Write write) {
  if (!bypass_cache) return write(dst);
  uint8_t* scratch = SampleScratch(bytes);
  write(scratch);
  CopyPastCaches(scratch, bytes, dst);
}

}  // namespace sluice::ops

#endif  // SLUICE_OPS_VALUE_LOOPS_H_
