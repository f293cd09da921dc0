// Report::ToJson and ToText: what `placement: "auto"` decided, for
// Python's pipe.placement(), `sluice run` and the metrics.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "sluice/placement/placed_pipeline.h"

namespace sluice::placement {
namespace {

nlohmann::json PlacementJson(const Placement& p) {
  return {{"threads", p.threads},   {"local_workers", p.local_workers}, {"service_workers", p.service_workers},
          {"gpu_tail", p.gpu_tail}, {"keep_prefix", p.keep_prefix},     {"description", p.Describe()}};
}

nlohmann::json MeasurementsJson(const Measurements& m) {
  return {{"placement", PlacementJson(m.placement)},
          {"seconds", m.seconds},
          {"cores", m.cores},
          {"samples_per_s", m.rate},
          {"trainer_wait_share", m.wait_share},
          {"trainer_samples_per_s", TrainerRate(m)},
          {"process_cores", m.process_cores},
          {"engine_cores", m.engine_cores},
          {"trainer_cores", TrainerCores(m)},
          {"cpu_s_per_sample", m.cpu_s_per_sample},
          {"front_share", m.front_share},
          {"front_bytes_per_sample", m.front_bytes_per_sample},
          {"memory_free_bytes", m.memory_free_bytes},
          {"prefix_share", m.prefix_share},
          {"prefix_bytes", m.prefix_bytes},
          {"prefix_room_bytes", m.prefix_room_bytes}};
}

}  // namespace

std::string Report::ToJson() const {
  nlohmann::json j;
  j["pipeline"] = pipeline;
  j["mode"] = automatic ? "auto" : "manual";
  j["placement"] = PlacementJson(placement);
  j["running"] = PlacementJson(running);
  j["judging"] = judging;
  j["levers"] = {{"threads", levers.threads},
                 {"local_workers", levers.local_workers},
                 {"service_workers", levers.service_workers},
                 {"gpu_tail", levers.gpu_tail},
                 {"keep_prefix", levers.keep_prefix}};
  j["decisions"] = decisions;
  j["kept_prefix"] = kept_prefix.empty() ? nlohmann::json() : nlohmann::json(kept_prefix);
  j["last_window"] = last.seconds > 0 ? MeasurementsJson(last) : nlohmann::json();
  j["alternatives"] = nlohmann::json::array();
  for (const Candidate& c : alternatives) {
    j["alternatives"].push_back(
        {{"placement", PlacementJson(c.placement)}, {"predicted_samples_per_s", c.predicted_rate}, {"why", c.why}});
  }
  return j.dump();
}

std::string Report::ToText() const {
  if (!automatic) return absl::StrCat("placement: as written, ", placement.Describe(), "\n");
  std::string out = absl::StrCat("placement: auto, now ", placement.Describe(), "\n");
  if (last.seconds > 0) {
    absl::StrAppendFormat(&out,
                          "  last window: %.0f samples/s, the trainer waited %.0f%%, the engine computed on %.1f "
                          "of %d cores, the trainer on %.1f\n",
                          last.rate, 100 * last.wait_share, last.engine_cores, last.cores, TrainerCores(last));
  }
  for (const std::string& d : decisions) absl::StrAppend(&out, "  ", d, "\n");
  if (decisions.empty()) absl::StrAppend(&out, "  no move: nothing measured called for one\n");
  return out;
}

}  // namespace sluice::placement
