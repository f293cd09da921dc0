// The params of the geometric ops (the warps: random_flip, random_rotation,
// random_zoom, random_affine, random_perspective and the fused warp the
// graph makes of them; hwc_to_chw), shared by the kernels of every backend
// (ops/cuda/geometry.cc) and the graph's warp fusions; and what each warp
// draws per sample. The resampling itself is kernels/warp.h.
#ifndef SLUICE_OPS_GEOMETRY_PARAMS_H_
#define SLUICE_OPS_GEOMETRY_PARAMS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/rng.h"
#include "sluice/kernels/warp.h"
#include "sluice/ops/field.h"

namespace sluice::ops {

// hwc_to_chw: [H,W,C] to [C,H,W].
struct HwcToChwParams {
  ImageDims dims;
  size_t elem;  // bytes per value
};

// What one geometric op draws per sample.
struct WarpPart {
  enum class Kind { kFlip, kRotation, kZoom, kAffine, kPerspective };
  Kind kind = Kind::kFlip;
  bool horizontal = false, vertical = false;  // kFlip: the directions allowed
  float p = 0.5f;                             // kFlip: each direction's probability; kPerspective: of applying it
  // kRotation, kAffine: degrees; kZoom: magnification (> 1 enlarges).
  float lo = 0, hi = 0;
  // kPerspective: the distortion scale, in double as torchvision's
  // int(distortion_scale * half_width) takes it (in float the bound moved
  // by one pixel for some sizes).
  double distortion = 0;
  // kAffine (torchvision's RandomAffine): the largest shift as a share of
  // the width and height, the scale's range, and the shears' ranges
  // (degrees, x then y).
  float translate_x = 0, translate_y = 0;
  float scale_lo = 1, scale_hi = 1;
  float shear_x_lo = 0, shear_x_hi = 0, shear_y_lo = 0, shear_y_hi = 0;
};

// The ops whose params are WarpParams (the graph fuses them), and those of
// them that resample (every one but random_flip, which moves whole pixels).
bool IsWarpOp(const std::string& op);
bool IsResamplingWarpOp(const std::string& op);

// The map one sample gets from `part` on images of `dims`; draws from `rng`
// in a fixed order (a flip draws its horizontal, then its vertical coin).
kernels::Affine SampleMap(const WarpPart& part, const ImageDims& dims, SampleRng& rng);

// The params of random_flip, random_rotation and random_zoom.
struct WarpParams {
  kernels::WarpSpec spec;
  WarpPart part;
};

// The op the graph makes of consecutive warps on one column: their parts in
// order, each drawing from the stream of its own op's key, so the
// transforms are the ones the separate ops would apply; only interpolation
// differs (once instead of once per op).
inline constexpr char kFusedWarpOp[] = "fused_warp";
struct FusedWarpParams {
  kernels::WarpSpec spec;
  std::vector<std::pair<WarpPart, uint64_t>> parts;  // (part, op key)
};

// Whether two warps can share one resampling.
bool CanFuse(const kernels::WarpSpec& a, const kernels::WarpSpec& b);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_GEOMETRY_PARAMS_H_
