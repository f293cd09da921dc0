// sluice-bench tuning: on W1 and W2, the autotuner against the best of a
// sweep of hand-set map parallelism and prefetch depths, and what the
// per-node statistics cost (stats on against off, in alternating order).
// Every setting is run once per run, interleaved; medians of the runs.
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_util.h"
#include "nlohmann/json.hpp"
#include "sluice/cli/progress.h"
#include "sluice/core/status_macros.h"
#include "workloads.h"

namespace sluice::bench {
namespace {

struct Setting {
  std::string label;
  PipelineDef def;
  std::vector<double> rates;
};

// The workload with autotuning off: map parallelism and prefetch depth as
// given (one parallelism per map node, in order).
PipelineDef HandSet(PipelineDef def, const std::vector<int>& parallelism, int depth) {
  def.mutable_options()->set_no_autotune(true);
  size_t map = 0;
  for (NodeDef& n : *def.mutable_nodes()) {
    if (n.has_map()) n.mutable_map()->set_parallelism(parallelism[map++]);
    if (n.has_prefetch()) n.mutable_prefetch()->set_buffer_size(depth);
  }
  return def;
}

std::vector<Setting> Sweep(const PipelineDef& def, int maps, const std::vector<int>& depths) {
  std::vector<Setting> out;
  std::vector<std::vector<int>> parallelism;
  for (int p1 = 1; p1 <= 2; ++p1) {
    if (maps == 1) parallelism.push_back({p1});
    for (int p2 = 1; maps == 2 && p2 <= 2; ++p2) parallelism.push_back({p1, p2});
  }
  for (const std::vector<int>& p : parallelism) {
    for (int depth : depths) {
      std::string label = "parallelism";
      for (int v : p) absl::StrAppend(&label, " ", v);
      absl::StrAppend(&label, ", depth ", depth);
      out.push_back(Setting{label, HandSet(def, p, depth), {}});
    }
  }
  return out;
}

struct Workload {
  std::string name;
  std::vector<Setting> sweep;
  Setting autotuned, stats_on, stats_off;
  std::vector<double> tuning;       // the autotuned pipeline's first run, while it tunes
  std::vector<double> stats_ratio;  // on / off, per run
};

Workload MakeWorkload(const std::string& name, const PipelineDef& def, int maps, const std::vector<int>& depths) {
  Workload w;
  w.name = name;
  w.sweep = Sweep(def, maps, depths);
  w.autotuned = Setting{"autotune", def, {}};
  PipelineDef fixed = def;
  fixed.mutable_options()->set_no_autotune(true);
  w.stats_on = Setting{"stats on", fixed, {}};
  fixed.mutable_options()->set_no_stats(true);
  w.stats_off = Setting{"stats off", fixed, {}};
  return w;
}

}  // namespace

absl::Status BenchTuning(const BenchArgs& args) {
  SLUICE_RETURN_IF_ERROR(EnsureData(args.data, true, true));
  std::vector<Workload> workloads = {
      MakeWorkload("w1", W1Pipeline(args.data + "/mnist"), 1, {1, 2, 4, 8}),
      MakeWorkload("w2", W2Pipeline(args.data + "/cifar10"), 2, {1, 2, 4}),
  };
  for (int run = 1; run <= args.runs; ++run) {
    for (Workload& w : workloads) {
      // The autotuned pipeline tunes during a first run (its tuner lives
      // in the Pipeline) and is measured in a second.
      SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<placement::PlacedPipeline> tuned,
                              placement::PlacedPipeline::Create(w.autotuned.def));
      RunOptions options;
      options.progress = false;
      options.min_seconds = 2 * args.seconds;
      SLUICE_ASSIGN_OR_RETURN(RunReport first, RunPipeline(*tuned, options));
      options.min_seconds = args.seconds;
      SLUICE_ASSIGN_OR_RETURN(RunReport second, RunPipeline(*tuned, options));
      w.tuning.push_back(first.samples_per_s);
      w.autotuned.rates.push_back(second.samples_per_s);
      // Statistics on and off back to back, in alternating order.
      std::vector<Setting*> all = {&w.stats_on, &w.stats_off};
      if (run % 2 == 0) std::swap(all[0], all[1]);
      for (Setting& s : w.sweep) all.push_back(&s);
      for (Setting* s : all) {
        SLUICE_ASSIGN_OR_RETURN(RunReport r, RunForSeconds(s->def, args.seconds));
        s->rates.push_back(r.samples_per_s);
      }
      w.stats_ratio.push_back(w.stats_on.rates.back() / w.stats_off.rates.back());
      std::fprintf(stderr, "run %d/%d %s: autotune %s, stats on %s / off %s samples/s\n", run, args.runs,
                   w.name.c_str(), WithCommas(w.autotuned.rates.back()).c_str(),
                   WithCommas(w.stats_on.rates.back()).c_str(), WithCommas(w.stats_off.rates.back()).c_str());
    }
  }

  nlohmann::json j;
  j["workload"] = "tuning";
  j["runs"] = args.runs;
  j["machine"] = MachineDescription();
  std::printf("\nautotune and statistics, median of %d runs on %s\n", args.runs, MachineDescription().c_str());
  for (const Workload& w : workloads) {
    const Setting* best = &w.sweep.front();
    nlohmann::json sweep = nlohmann::json::object();
    std::printf("\n%s sweep (autotune off):\n", w.name.c_str());
    for (const Setting& s : w.sweep) {
      std::printf("  %-28s %12s samples/s\n", s.label.c_str(), WithCommas(Median(s.rates)).c_str());
      sweep[s.label] = Median(s.rates);
      if (Median(s.rates) > Median(best->rates)) best = &s;
    }
    const double tuned = Median(w.autotuned.rates), hand = Median(best->rates);
    const double stats_cost = 1 - Median(w.stats_ratio);
    std::printf("  best hand-set: %s, %s samples/s\n", best->label.c_str(), WithCommas(hand).c_str());
    std::printf("  autotune:      %s samples/s (%.1f%% of the best); while tuning (first %.0f s) %s\n",
                WithCommas(tuned).c_str(), 100 * tuned / hand, 2 * args.seconds, WithCommas(Median(w.tuning)).c_str());
    std::printf("  statistics cost %.1f%% of throughput (on %s, off %s samples/s)\n", 100 * stats_cost,
                WithCommas(Median(w.stats_on.rates)).c_str(), WithCommas(Median(w.stats_off.rates)).c_str());
    j[w.name] = {{"sweep", sweep},
                 {"best_hand_set", best->label},
                 {"best_hand_set_samples_per_s", hand},
                 {"autotune_samples_per_s", tuned},
                 {"autotune_vs_best", tuned / hand},
                 {"autotune_while_tuning_samples_per_s", Median(w.tuning)},
                 {"stats_on_samples_per_s", Median(w.stats_on.rates)},
                 {"stats_off_samples_per_s", Median(w.stats_off.rates)},
                 {"stats_cost", stats_cost}};
  }
  if (args.json) std::printf("%s\n", j.dump().c_str());
  return absl::OkStatus();
}

}  // namespace sluice::bench
