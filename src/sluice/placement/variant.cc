#include "sluice/placement/variant.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sluice/graph/thread_limit.h"

namespace sluice::placement {
namespace {

// Where a distribute node goes: before the batch node, or at the end.
int FrontEnd(const PipelineDef& def) {
  for (int i = 0; i < def.nodes_size(); ++i) {
    if (def.nodes(i).has_batch()) return i;
  }
  return def.nodes_size();
}

constexpr double kServiceConnectTimeoutS = 3;

bool ReadableByWorkers(const SourceDef& source) { return !source.has_python_dataset() && !source.has_arrow_memory(); }

}  // namespace

absl::Status CheckPlacementOption(const PipelineDef& def) {
  const std::string& p = def.options().placement();
  if (!p.empty() && p != "manual" && p != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("options.placement: \"", p, "\" is not a placement; use \"auto\" or \"manual\""));
  }
  if (!def.options().has_placement_service()) return absl::OkStatus();
  if (p != "auto") {
    return absl::InvalidArgumentError(
        "options.placement_service names a dispatcher for placement \"auto\" to move work to; set placement "
        "\"auto\", or put a distribute node where the work should go");
  }
  if (def.options().placement_service().dispatcher().empty()) {
    return absl::InvalidArgumentError(
        "options.placement_service.dispatcher is empty: give the dispatcher's host:port (local worker processes "
        "need no dispatcher: placement \"auto\" starts them itself)");
  }
  return absl::OkStatus();
}

bool IsAuto(const PipelineDef& def) { return def.options().placement() == "auto"; }

Levers FreeLevers(const PipelineDef& def) {
  Levers levers;
  levers.threads = def.options().threads() <= 0;
  levers.local_workers = def.nodes_size() > 0 && def.nodes(0).has_source() && ReadableByWorkers(def.nodes(0).source());
  for (int i = 1; i < FrontEnd(def); ++i) {
    const NodeDef& n = def.nodes(i);
    if (!n.has_map() && !n.has_filter() && !n.has_shuffle() && !n.has_prefetch()) levers.local_workers = false;
  }
  for (const NodeDef& n : def.nodes()) {
    if (n.has_distribute() || n.has_shard()) levers.local_workers = false;
  }
  levers.service_workers = levers.local_workers && !def.options().placement_service().dispatcher().empty();
  return levers;
}

const DistributeDef* WrittenDistribute(const PipelineDef& def) {
  for (const NodeDef& n : def.nodes()) {
    if (n.has_distribute()) return &n.distribute();
  }
  return nullptr;
}

Placement StartingPlacement(const PipelineDef& def, int cores) {
  Placement p;
  p.threads = def.options().threads() > 0 ? def.options().threads() : std::min(cores, graph::kMaxThreads);
  // Where the definition's own distribute node sends the work (it stays).
  if (const DistributeDef* d = WrittenDistribute(def)) {
    if (d->dispatcher().empty()) {
      p.local_workers = std::max(1, d->local_workers());
    } else {
      p.service_workers = true;
    }
  }
  return p;
}

PipelineDef Variant(const PipelineDef& def, const Placement& placement) {
  PipelineDef out = def;
  out.mutable_options()->clear_placement();
  out.mutable_options()->clear_placement_service();
  out.mutable_options()->set_threads(placement.threads);
  if (!placement.in_process() && WrittenDistribute(def) == nullptr) {
    NodeDef distribute;
    if (placement.service_workers) {
      DistributeDef* service = distribute.mutable_distribute();
      *service = def.options().placement_service();
      // The trainer waits while a move connects: a dispatcher that does not
      // answer refuses the move soon, not after a distribute node's 30 s.
      if (service->connect_timeout_s() <= 0) service->set_connect_timeout_s(kServiceConnectTimeoutS);
    } else {
      distribute.mutable_distribute()->set_local_workers(placement.local_workers);
    }
    auto* nodes = out.mutable_nodes();
    nodes->Add(std::move(distribute));
    std::rotate(nodes->begin() + FrontEnd(def), nodes->end() - 1, nodes->end());
  }
  return out;
}

}  // namespace sluice::placement
