// Optimization passes over a map's op chain: neighbouring ops that can run
// as one kernel become one internal op with the same output. They match
// ops by registered name and params (never by kernel class), and fuse only
// where the fused op has a kernel for the map's backend.
#ifndef SLUICE_GRAPH_FUSION_H_
#define SLUICE_GRAPH_FUSION_H_

#include <vector>

#include "sluice/graph/compiled_pipeline.h"

namespace sluice::graph {

struct FusionOptions {
  const ops::OpRegistry& registry;
  ops::Backend backend;
};

// Consecutive random_flip, random_rotation and random_zoom on the same
// column become ops::kFusedWarpOp, which composes their affine maps and
// resamples once. The transforms are the same (each part keeps its own
// random stream); only interpolation happens once instead of once per op,
// which is both cheaper and sharper.
void FuseWarps(const FusionOptions& options, std::vector<BoundOp>* ops);

// A rescale of uint8 right before a warp that resamples (a fused warp, a
// rotation or a zoom) on the same column folds into the warp: it reads the
// uint8 pixels, interpolates them in float and rescales its output. Equal to
// warping the rescaled image within float rounding (the taps are weighted
// before the rescale instead of after), from a quarter of the bytes and
// gathers. On the cpu backend.
void FuseRescaleIntoWarp(const FusionOptions& options, std::vector<BoundOp>* ops);

// hwc_to_chw right after a warp (fused, or a rotation or zoom alone) on the
// same column folds into it: the warp writes planes [C,H,W] directly, so the
// layout PyTorch models take costs no pass of its own. Outputs are
// identical. On the cpu backend.
void FuseLayout(const FusionOptions& options, std::vector<BoundOp>* ops);

// A decode op (decode_image, decode_random_resized_crop,
// decode_resize_center_crop) followed by crop_mirror_normalize without a
// crop on the same column becomes ops::kFusedDecodeNormalizeOp, which
// resamples straight into the normalized output (ops/decode_params.h).
// Outputs are identical; the decoded image is never written as bytes and
// read back.
void FuseDecodeNormalize(const FusionOptions& options, std::vector<BoundOp>* ops);

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_FUSION_H_
