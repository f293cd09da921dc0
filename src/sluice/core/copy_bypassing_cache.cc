#include "sluice/core/copy_bypassing_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace sluice {

void CopyBypassingCache(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  // Below this a copy's lines fit the L2 cache: whoever reads them next
  // gains from finding them there.
  constexpr size_t kStreamFrom = 256 << 10;
  if (n >= kStreamFrom) {
    auto* d = static_cast<uint8_t*>(dst);
    const auto* s = static_cast<const uint8_t*>(src);
    // SSE2's 16-byte stores are in every x86-64 CPU; the copy is bound by
    // memory, not by the width of the stores.
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
    std::memcpy(d, s, head);
    size_t i = head;
    for (; i + 64 <= n; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    std::memcpy(d + i, s + i, n - i);
    _mm_sfence();  // the streaming stores are seen before whatever follows
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace sluice
