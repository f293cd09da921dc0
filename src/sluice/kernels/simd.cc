#include "sluice/kernels/simd.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "hwy/highway.h"
#include "hwy/targets.h"

namespace sluice::kernels {
namespace {

// The targets better than `name`'s, which the cap disables.
absl::StatusOr<int64_t> Above(absl::string_view name) {
#if HWY_ARCH_X86
  const int64_t avx512 = HWY_AVX3 | HWY_AVX3_DL;
  if (name.empty() || name == "best") return 0;
  if (name == "avx512") return int64_t{0};
  if (name == "avx2") return avx512;
  if (name == "sse4") return avx512 | HWY_AVX2;
  if (name == "ssse3") return avx512 | HWY_AVX2 | HWY_SSE4;
#else
  if (name.empty() || name == "best") return 0;
#endif
  return absl::InvalidArgumentError(
      absl::StrCat("SIMD target \"", name, "\" is unknown (avx512, avx2, sse4, ssse3, or best)"));
}

// The targets the current cap disables.
std::atomic<int64_t> capped{0};

// hwy::SupportedTargets(), keeping the dispatch on them: Highway 1.0's
// points HWY_DYNAMIC_DISPATCH at every target the CPU has, disabled or not
// (a test's SimdTarget() undid its LimitSimd), until Update says otherwise.
int64_t Usable() {
  const int64_t targets = hwy::SupportedTargets();
  hwy::GetChosenTarget().Update(targets);
  return targets;
}

}  // namespace

absl::Status LimitSimd(absl::string_view name) {
  absl::StatusOr<int64_t> disabled = Above(name);
  if (!disabled.ok()) return disabled.status();
  hwy::DisableTargets(0);  // what the CPU has, uncapped
  if ((hwy::SupportedTargets() & HWY_TARGETS & ~*disabled) == 0) {
    hwy::DisableTargets(capped.load());  // the cap stays as it was
    Usable();
    return absl::InvalidArgumentError(
        absl::StrCat("SIMD target \"", name, "\" is below what this build was compiled for (",
                     hwy::TargetName(HWY_STATIC_TARGET), ", SLUICE_MARCH): its kernels cannot run there"));
  }
  hwy::DisableTargets(*disabled);
  Usable();  // the dispatch follows the cap now
  capped.store(*disabled);
  return absl::OkStatus();
}

void LimitSimdFromEnvironment() {
  static const bool once = [] {
    const char* env = std::getenv("SLUICE_SIMD");
    if (env == nullptr) return true;
    const absl::Status s = LimitSimd(env);
    if (!s.ok()) std::fprintf(stderr, "sluice: SLUICE_SIMD ignored: %s\n", std::string(s.message()).c_str());
    return true;
  }();
  (void)once;
}

std::string SimdTarget() {
  const int64_t usable = Usable() & HWY_TARGETS;
  // The best target is the lowest bit.
  return hwy::TargetName(usable & -usable);
}

}  // namespace sluice::kernels
