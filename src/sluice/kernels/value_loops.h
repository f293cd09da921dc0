// The element-wise loops of the value ops (rescale, normalize, mixup), compiled
// once per SIMD target and chosen at run time: at the portable baseline
// the compiler would vectorize them for SSE only. And the copy past the
// caches that kernels writing a sample at a time use (SampleWriter).
#ifndef SLUICE_KERNELS_VALUE_LOOPS_H_
#define SLUICE_KERNELS_VALUE_LOOPS_H_

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace sluice::kernels {

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

// memcpy(dst, src, n), from 256 KiB with streaming (non-temporal) stores,
// for large blocks another process reads later (a worker's batch into a
// client's shared-memory ring): they skip reading each destination line
// before writing it and leave the caches to the data this process works
// on. A 12 MiB batch into a 64 MiB ring: 4.9 GB/s through memcpy, 6.5 GB/s
// so (2-core Zen 3). The stores are fenced before it returns.
void CopyBypassingCache(void* dst, const void* src, size_t n);

// Writes samples' outputs, with `bypass_cache` (KernelContext's) past the
// caches: each is produced in per-thread scratch that stays in L1 and then
// copied out with non-temporal stores, fenced once when the writer goes
// (a fence per sample stalls on every sample's stores). For kernels that
// write a sample at a time.
class SampleWriter {
 public:
  explicit SampleWriter(bool bypass_cache) : bypass_cache_(bypass_cache) {}
  ~SampleWriter();
  SampleWriter(const SampleWriter&) = delete;
  SampleWriter& operator=(const SampleWriter&) = delete;

  // Calls write(out) to produce `bytes` of output at dst: out is dst, or
  // the scratch that is copied to dst after.
  template <typename Write>
  void operator()(uint8_t* dst, int64_t bytes, Write write) {
    if (!bypass_cache_) return write(dst);
    uint8_t* scratch = Scratch(bytes);
    write(scratch);
    Stream(scratch, bytes, dst);
  }

 private:
  static uint8_t* Scratch(int64_t bytes);
  static void Stream(const uint8_t* src, int64_t n, uint8_t* dst);
  bool bypass_cache_;
};

// Round-to-nearest (ties to even) with saturation when storing a float into T.
template <typename T>
inline T StoreAs(float v);
template <>
inline float StoreAs<float>(float v) {
  return v;
}
template <>
inline uint8_t StoreAs<uint8_t>(float v) {
  v = v < 0.f ? 0.f : (v > 255.f ? 255.f : v);
  return static_cast<uint8_t>(std::nearbyint(v));  // ties to even
}

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_VALUE_LOOPS_H_
