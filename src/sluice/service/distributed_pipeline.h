// The entry point for running any pipeline definition: in-process when it
// has no distribute node; otherwise the nodes before that node run on the
// service's workers (through the dispatcher it names, or an embedded one
// with local worker processes) and the rest in this process.
#ifndef SLUICE_SERVICE_DISTRIBUTED_PIPELINE_H_
#define SLUICE_SERVICE_DISTRIBUTED_PIPELINE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "pipeline.pb.h"
#include "sluice/exec/pipeline.h"

namespace sluice::service {

absl::StatusOr<std::unique_ptr<exec::Pipeline>> CreatePipeline(const PipelineDef& def);

// The nodes before the distribute node at `index`, with the pipeline's
// name, seed and options: what the workers run.
PipelineDef WorkersPart(const PipelineDef& def, int index);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_DISTRIBUTED_PIPELINE_H_
