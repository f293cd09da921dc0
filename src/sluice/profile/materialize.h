// `sluice materialize`: do once what need not be done every epoch. The
// pipeline's deterministic prefix (the source and the whole map nodes after
// it whose ops draw no random numbers) runs once and its output is written
// to TFRecords of tf.train.Example, one file per source file, record for
// record, with an index each; a rewritten pipeline reads them and goes on
// with the rest. Files, record numbers, node names and op positions are
// kept, so every random draw after the prefix is keyed as before and the
// rewritten pipeline's output is bit-identical to the original's for the
// same seed.
#ifndef SLUICE_PROFILE_MATERIALIZE_H_
#define SLUICE_PROFILE_MATERIALIZE_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline.pb.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::profile {

struct MaterializeResult {
  PipelineDef rewritten;  // also written to <out_dir>/pipeline.json
  std::string pipeline_path;
  std::vector<std::string> files;  // the records written
  int64_t records = 0;
  int64_t bytes = 0;
  std::vector<std::string> ops;  // what was done once
};

// FailedPrecondition when there is no deterministic prefix to write (the
// node after the source draws random numbers, or is not a map on the CPU),
// when its output has a ragged column, or when the records written could
// not be read in the source's order (splits of its format's own, a shuffle
// over a source that cannot seek its records); Cancelled once `stop` (may be null) is
// set. The rewritten pipeline's output fingerprint is `def`'s
// (options.materialized_from).
absl::StatusOr<MaterializeResult> Materialize(const PipelineDef& def, const std::string& out_dir,
                                              const std::function<void(int64_t records)>& progress,
                                              const std::atomic<bool>* stop = nullptr);

// How many map nodes after the source `def` (`compiled`) has whose output
// can be written once and read back in the same order, for placement
// "auto" to keep: as Materialize's, but stopping at a Python op, whose
// draws sluice cannot see; 0 when there are none.
int MaterializableMaps(const PipelineDef& def, const graph::CompiledPipeline& compiled);

// Whether records Materialize writes from `def`'s source would be read back
// in the source's order (the profile offers materializing only then).
bool ReadsBackInOrder(const PipelineDef& def, const graph::CompiledPipeline& compiled);

}  // namespace sluice::profile

#endif  // SLUICE_PROFILE_MATERIALIZE_H_
