// Params of the geometric ops that are not warps (those are in warp.h),
// shared by the kernels of every backend (ops/cuda/ has them too).
#ifndef SLUICE_OPS_GEOMETRY_H_
#define SLUICE_OPS_GEOMETRY_H_

#include <cstddef>

#include "sluice/ops/field.h"

namespace sluice::ops {

// hwc_to_chw: [H,W,C] to [C,H,W].
struct HwcToChwParams {
  ImageDims dims;
  size_t elem;  // bytes per value
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_GEOMETRY_H_
