// Which SIMD target the hot kernels run on. They are compiled for every
// target of the architecture (SSSE3, SSE4, AVX2, AVX-512 on x86) and use the
// best the CPU has; SLUICE_SIMD=avx2 (or sse4, ssse3) caps that, to compare
// targets on one machine or to avoid AVX-512's clock throttling.
#ifndef SLUICE_KERNELS_SIMD_H_
#define SLUICE_KERNELS_SIMD_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::kernels {

// Caps the targets at `name`: "avx512", "avx2", "sse4", "ssse3", or ""
// / "best" for no cap. InvalidArgument naming the choices otherwise. Call
// before any kernel runs (a kernel keeps the target of its first call).
absl::Status LimitSimd(absl::string_view name);

// Applies $SLUICE_SIMD once per process (a bad value is reported on stderr
// and ignored). The op registry calls it when it is first used.
void LimitSimdFromEnvironment();

// The target the kernels use, e.g. "AVX3" (AVX-512), "AVX3_DL" (AVX-512 of
// Ice Lake and later, in builds with a -march above the default) or "AVX2".
std::string SimdTarget();

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_SIMD_H_
