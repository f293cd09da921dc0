#include "sluice/profile/report_json.h"

#include "nlohmann/json.hpp"

namespace sluice::profile {

std::string JsonReport(const ProfileResult& r) {
  const Findings& f = r.findings;
  nlohmann::json j;
  j["pipeline"] = f.pipeline;
  j["threads"] = f.threads;
  j["samples_per_s"] = f.samples_per_s;
  j["input_only_samples_per_s"] = f.input_only_samples_per_s;
  j["cpu_s_per_sample"] = f.cpu_s_per_sample;
  j["consumer_samples_per_s"] = f.consumer_samples_per_s;
  j["paced_wait_share"] = f.paced_wait_share;
  j["materializable_share"] = f.materializable_share;
  j["front_share"] = f.front_share;
  j["uncached_objects"] = f.uncached_objects;
  static const char* kBounds[] = {"reading", "compute", "trainer"};
  j["verdict"] = {{"bound", kBounds[static_cast<int>(r.verdict.bound)]},
                  {"bottleneck", r.verdict.bottleneck},
                  {"summary", r.verdict.summary}};
  j["levers"] = nlohmann::json::array();
  for (const Lever& l : r.verdict.levers) {
    j["levers"].push_back(
        {{"action", l.action}, {"predicted_samples_per_s", l.predicted_samples_per_s}, {"why", l.why}});
  }
  j["ops"] = nlohmann::json::array();
  for (const OpCost& op : f.ops) {
    j["ops"].push_back({{"node", op.node_name},
                        {"op", op.op_name},
                        {"view", op.view},
                        {"random", op.random},
                        {"core_s_per_1k", op.core_s_per_1k},
                        {"cpu_share", op.cpu_share},
                        {"ablated_samples_per_s", op.ablated_samples_per_s}});
  }
  j["nodes"] = nlohmann::json::array();
  for (const exec::NodeStatsSnapshot& n : r.full.nodes) {
    j["nodes"].push_back({{"name", n.name},
                          {"elements", n.elements},
                          {"rows", n.rows},
                          {"bytes", n.bytes},
                          {"busy_s", n.busy_ns * 1e-9},
                          {"input_wait_s", n.input_wait_ns * 1e-9},
                          {"output_wait_s", n.output_wait_ns * 1e-9}});
  }
  j["autotune"] = nlohmann::json::array();
  for (const exec::Knob& k : r.full.tuned) {
    j["autotune"].push_back({{"node", k.node_name},
                             {"knob", k.kind == exec::Knob::Kind::kParallelism ? "parallelism" : "depth"},
                             {"value", k.value}});
  }
  j["autotune_log"] = r.full.tune_log;
  j["memory"] = {{"budget", r.full.memory_budget},
                 {"peak_held", r.full.memory.peak_held_bytes},
                 {"peak_in_use", r.full.memory.peak_live_bytes},
                 {"cached", r.full.memory.cached_bytes}};
  j["seconds"] = r.full.seconds;
  if (!r.note.empty()) j["note"] = r.note;
  return j.dump();
}

}  // namespace sluice::profile
