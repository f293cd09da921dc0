// The least memory a pipeline makes progress in, held against its budget: a
// budget the options set below it is refused, a default one is raised to it.
#ifndef SLUICE_EXEC_MEMORY_MINIMUM_H_
#define SLUICE_EXEC_MEMORY_MINIMUM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sluice/core/buffer_pool.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::exec {

struct MemoryMinimum {
  // One chunk of each map node's outputs that come from the pipeline's own
  // pool (a whole batch when the batch node passes chunks on).
  int64_t bytes = 0;
  // The largest of those chunks: about the element a consumer holds.
  int64_t largest = 0;
  int64_t chunk_rows = 0;
  std::vector<std::string> parts;  // "node 'map_1' 154140672", one a map node
};

// `output_pools`: per node, the pool its outputs come from, null for the
// pipeline's own (Pipeline::OutputPools).
MemoryMinimum MeasureMemoryMinimum(const graph::CompiledPipeline& c, int64_t chunk_rows,
                                   const std::vector<BufferPool*>& output_pools);

// InvalidArgument when a budget the options set is below the minimum,
// naming it and each map node's share.
absl::Status CheckMemoryBudget(const graph::CompiledPipeline& c, const MemoryMinimum& minimum);

// A default budget (the options set none) is sized to the machine, not to
// the pipeline: one whose batches are large for the machine needs more to
// make a batch while its consumer holds the last, as a training loop's
// `for batch in loader` does. Such a budget is raised to that, and its
// description says so; InvalidArgument when that is more than the memory
// the process may use.
absl::Status FitDefaultMemoryBudget(const MemoryMinimum& minimum, graph::CompiledPipeline* c);

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_MEMORY_MINIMUM_H_
