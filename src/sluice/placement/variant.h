// The definitions a placement runs: the user's pipeline with the thread
// count and the worker processes a placement gives it. The output is the
// same in every variant (the fingerprint leaves out threads, distribute
// nodes and order), so an epoch may move between them through its state.
#ifndef SLUICE_PLACEMENT_VARIANT_H_
#define SLUICE_PLACEMENT_VARIANT_H_

#include "absl/status/status.h"
#include "pipeline.pb.h"
#include "sluice/placement/policy.h"

namespace sluice::placement {

// OK for "", "manual" and "auto" (and a placement_service naming a
// dispatcher under "auto"); InvalidArgument naming the option otherwise.
absl::Status CheckPlacementOption(const PipelineDef& def);
bool IsAuto(const PipelineDef& def);

// The levers `def` leaves to sluice: threads unless the options give a
// count; local workers unless it has a distribute or shard node, a source
// only this process can read (Python datasets, Arrow data in memory) or a
// node before its batch that a worker's part cannot end at; the
// dispatcher's workers as local ones, when the options name a dispatcher.
Levers FreeLevers(const PipelineDef& def);

// Where `def` starts: its thread count, or one per core, and where its
// own distribute node sends the work.
Placement StartingPlacement(const PipelineDef& def, int cores);
// The definition's own distribute node, or null.
const DistributeDef* WrittenDistribute(const PipelineDef& def);

// `def` at `placement`: its threads, and with local workers a distribute
// node (embedded dispatcher) before the batch node, or at the end when
// there is none; with the dispatcher's workers, options.placement_service
// as that node; no node where the definition has its own.
PipelineDef Variant(const PipelineDef& def, const Placement& placement);

}  // namespace sluice::placement

#endif  // SLUICE_PLACEMENT_VARIANT_H_
