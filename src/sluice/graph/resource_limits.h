// Caps on what a pipeline definition may make a process allocate, checked
// on the compiled plan before any kernel is set up or buffer reserved: the
// dispatcher applies them to every pipeline it is sent, so one definition
// with a huge batch or buffer cannot exhaust a shared service's memory.
#ifndef SLUICE_GRAPH_RESOURCE_LIMITS_H_
#define SLUICE_GRAPH_RESOURCE_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::graph {

struct ResourceLimits {
  // An element (a sample, or a batch after a batch node) of fixed-size
  // columns; variable-length columns count 0, they are not known yet.
  int64_t max_batch_bytes = int64_t{2} << 30;
  // What one shuffle or prefetch node may buffer.
  int64_t max_buffer_bytes = int64_t{16} << 30;
  // The pipeline's threads and any map node's parallelism.
  int max_threads = 256;
};

// InvalidArgument naming the node, what it would hold and the limit.
absl::Status CheckResourceLimits(const CompiledPipeline& plan, const ResourceLimits& limits);

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_RESOURCE_LIMITS_H_
