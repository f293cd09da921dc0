// Ablation: an op replaced by a stand-in that keeps the pipeline's shapes
// and dtypes, so the pipeline runs on and the profiler can re-measure it
// without that op's cost.
#ifndef SLUICE_PROFILE_ABLATION_H_
#define SLUICE_PROFILE_ABLATION_H_

#include "absl/status/status.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::profile {

// Replaces op `op` of map node `node` by the stand-in: each output gets its
// first input's bytes when a row of both has the same size (so an op that
// keeps its column's spec becomes the identity), and zeros otherwise.
// InvalidArgument when there is no such op.
absl::Status AblateOp(graph::CompiledPipeline* pipeline, int node, int op);

}  // namespace sluice::profile

#endif  // SLUICE_PROFILE_ABLATION_H_
