// PipelineDef <-> JSON through protobuf's JSON mapping (no hand-written
// parser); errors name the field path, e.g. "(nodes[0].batch.size)".
#ifndef SLUICE_GRAPH_PIPELINE_JSON_H_
#define SLUICE_GRAPH_PIPELINE_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline.pb.h"

namespace sluice::graph {

// InvalidArgument "invalid pipeline JSON: <where>: <what>".
absl::StatusOr<PipelineDef> PipelineFromJson(absl::string_view json);
// Reads and parses a file; NotFound when it does not exist.
absl::StatusOr<PipelineDef> PipelineFromJsonFile(const std::string& path);
std::string PipelineToJson(const PipelineDef& def);

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_PIPELINE_JSON_H_
