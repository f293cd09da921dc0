// A decode op followed by crop_mirror_normalize (without a crop) on the same
// column, as one kernel: the resampler hands its rows straight to the
// normalization, so the decoded image is never written as bytes and read
// back. Outputs are identical to the two ops run apart.
#ifndef SLUICE_OPS_DECODE_FUSION_H_
#define SLUICE_OPS_DECODE_FUSION_H_

#include <cstdint>
#include <memory>

#include "sluice/ops/kernel.h"

namespace sluice::ops {

// The fused kernel, or null when `decode` is not a decode op's kernel or
// `normalize` not an uncropped crop_mirror_normalize's. `normalize_key` is
// the normalize op's key (its mirror draws); the fused kernel runs under
// the decode op's.
std::shared_ptr<const Kernel> FuseDecodeNormalize(const Kernel& decode, const Kernel& normalize,
                                                  uint64_t normalize_key);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_DECODE_FUSION_H_
