// Optimization pass: consecutive geometric ops of a map chain (random_flip,
// random_rotation, random_zoom) on the same column become one kernel that
// composes their affine maps and resamples once. The transforms are the
// same (each part keeps its own random stream); only interpolation happens
// once instead of once per op, which is both cheaper and sharper.
#ifndef SLUICE_GRAPH_FUSE_WARPS_H_
#define SLUICE_GRAPH_FUSE_WARPS_H_

#include <vector>

#include "sluice/graph/compiled_pipeline.h"

namespace sluice::graph {

void FuseWarps(std::vector<BoundOp>* ops);

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_FUSE_WARPS_H_
