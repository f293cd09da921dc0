// What the workers' part of a pipeline yields: its columns, batching,
// cardinality and splits, found by compiling it (on the dispatcher, or on a
// worker when the part uses ops only workers have).
#ifndef SLUICE_SERVICE_ELEMENT_SPEC_H_
#define SLUICE_SERVICE_ELEMENT_SPEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "service.pb.h"
#include "sluice/graph/resource_limits.h"

namespace sluice::service {

// InvalidArgument when `def` has a distribute node (register the part
// before it), when it breaks `limits` (checked before any kernel is set up
// or buffer reserved), or what compiling it or loading its source
// (SourceFormat::Load) says.
absl::StatusOr<ElementSpec> DescribeElements(const PipelineDef& def, const graph::ResourceLimits& limits);

// The order of `element`'s splits in epoch `epoch` (indices), as the
// in-process source would read them: the dispatcher hands them out so.
// `def`: the workers' part.
std::vector<int64_t> EpochSplitIndices(const ElementSpec& element, const PipelineDef& def, uint64_t epoch);

graph::ResourceLimits FromProto(const ResourceLimitsProto& limits);
ResourceLimitsProto ToProto(const graph::ResourceLimits& limits);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_ELEMENT_SPEC_H_
