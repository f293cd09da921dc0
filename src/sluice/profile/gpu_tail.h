// The GPU lever as a pipeline: the ops at the end of a pipeline that have
// cuda kernels, moved into one map with device "cuda" right after the
// batch, so the CPU keeps reading (and decoding, unless the build has
// nvJPEG: then JPEG bytes cross PCIe) and uint8 crosses PCIe.
// `profile` measures it when a GPU is present; users can write the same.
#ifndef SLUICE_PROFILE_GPU_TAIL_H_
#define SLUICE_PROFILE_GPU_TAIL_H_

#include "absl/status/statusor.h"
#include "pipeline.pb.h"
#include "sluice/ops/op_registry.h"

namespace sluice::profile {

// `def` with its tail on the GPU. The tail is the longest run of map ops
// at the end of the pipeline, after its last source, filter, shuffle,
// repeat, take or distribute node, that all run on cuda (kernels or views)
// and are not all views: per-sample ops apply to the batch's rows alike,
// and draw the same random numbers (they are keyed by sample). NotFound
// when there is no such tail, no batch node after that last barrier, or a
// device map already.
absl::StatusOr<PipelineDef> TailOnGpu(const PipelineDef& def, const ops::OpRegistry& registry);

}  // namespace sluice::profile

#endif  // SLUICE_PROFILE_GPU_TAIL_H_
