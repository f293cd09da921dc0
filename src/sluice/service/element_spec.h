// What the workers' part of a pipeline yields: its columns, batching,
// cardinality and splits, found by compiling it (on the dispatcher, or on a
// worker when the part uses ops only workers have).
#ifndef SLUICE_SERVICE_ELEMENT_SPEC_H_
#define SLUICE_SERVICE_ELEMENT_SPEC_H_

#include "absl/status/statusor.h"
#include "service.pb.h"
#include "sluice/graph/resource_limits.h"

namespace sluice::service {

// InvalidArgument when `def` has a distribute node (register the part
// before it), when it breaks `limits` (checked before any kernel is set up
// or buffer reserved), or what compiling it says.
absl::StatusOr<ElementSpec> DescribeElements(const PipelineDef& def, const graph::ResourceLimits& limits);

graph::ResourceLimits FromProto(const ResourceLimitsProto& limits);
ResourceLimitsProto ToProto(const graph::ResourceLimits& limits);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_ELEMENT_SPEC_H_
