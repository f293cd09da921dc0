// A map of per-sample ops right after a batch node whose input is another
// map runs its ops in that map's threads, before the batch: the same rows
// with the same draws (ops::KernelContext keys them by each sample's
// identity, not by the node), from one set of runners instead of two
// handing batches over. Torchvision- and Keras-style pipelines put their
// augmentation after the batch; W2 measured (bench/RESULTS.md, 2026-12-05):
// 178-185% of 2 cores in use instead of 160-168%, 1.16x the samples/s.
//
// Only the executor runs the merged map: the compiled pipeline (what
// profiles, statistics and placement see) keeps the nodes as written.
#ifndef SLUICE_EXEC_MAP_MERGE_H_
#define SLUICE_EXEC_MAP_MERGE_H_

#include <vector>

#include "sluice/graph/compiled_pipeline.h"

namespace sluice::exec {

// The nodes as the executor runs them: `nodes` less each merged map's ops,
// which the map two nodes before it runs (with its output schema, which the
// batch between them now batches). runs_before_batch[i]: node i is such a
// map (its iterator is its input's).
struct RunPlan {
  std::vector<graph::CompiledNode> nodes;
  std::vector<bool> runs_before_batch;
};

// Merges every map that can run before its batch: all of its ops per
// sample on the cpu, as are the map before the batch's (with the same
// parallelism), no corrupt rows skipped (a batch with rows refused after it
// is short, before it the batch would fill from the next rows) and no
// device map downstream (its staging buffers begin at the merged map).
RunPlan PlanRun(const graph::CompiledPipeline& compiled);

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_MAP_MERGE_H_
