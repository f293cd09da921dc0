// Optimization pass: a decode op (decode_image, decode_random_resized_crop,
// decode_resize_center_crop) followed by crop_mirror_normalize without a
// crop on the same column becomes one kernel that resamples straight into
// the normalized output (ops/decode_fusion.h). Outputs are identical; the
// decoded image is never written as bytes and read back.
#ifndef SLUICE_GRAPH_FUSE_DECODE_NORMALIZE_H_
#define SLUICE_GRAPH_FUSE_DECODE_NORMALIZE_H_

#include <vector>

#include "sluice/graph/compiled_pipeline.h"

namespace sluice::graph {

void FuseDecodeNormalize(std::vector<BoundOp>* ops);

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_FUSE_DECODE_NORMALIZE_H_
