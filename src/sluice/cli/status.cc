// sluice status --dispatcher HOST:P: workers, jobs and throughput.
// sluice status --process HOST:P: a training process's pipelines, from the
// metrics it serves: what each delivered, its memory, its placement and
// what placement "auto" decided.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "sluice/cli/command.h"
#include "sluice/cli/metrics_scrape.h"
#include "sluice/cli/progress.h"
#include "sluice/cli/serve.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/channel.h"
#include "sluice/service/fetch_status.h"

namespace sluice::cli {
namespace {

struct StatusArgs {
  std::string dispatcher;
  std::string process;
  bool json = false;
  SecurityFlags security;
};

absl::Status Show(const StatusArgs& args) {
  SLUICE_ASSIGN_OR_RETURN(service::SecurityOptions security, args.security.Options());
  SLUICE_RETURN_IF_ERROR(service::CheckAddress(args.dispatcher));
  SLUICE_ASSIGN_OR_RETURN(const DispatcherStatus status, service::FetchDispatcherStatus(args.dispatcher, security));
  if (args.json) {
    std::string text;
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(status, &text, options);
    std::printf("%s\n", text.c_str());
    return absl::OkStatus();
  }
  std::printf("dispatcher %s: %d pipeline(s)%s\n", args.dispatcher.c_str(), status.pipelines(),
              status.work_dir().empty() ? "" : (", journal in " + status.work_dir()).c_str());
  std::printf("\n%zu worker(s)\n", static_cast<size_t>(status.workers_size()));
  for (const WorkerStatusEntry& w : status.workers()) {
    std::printf("  worker %-4lld %-22s %d stream(s), %d ops, last heartbeat %.1f s ago\n",
                static_cast<long long>(w.worker_id()), w.address().c_str(), w.active_streams(), w.ops(),
                w.seconds_since_heartbeat());
  }
  std::printf("\n%zu job(s)\n", static_cast<size_t>(status.jobs_size()));
  for (const JobStatusEntry& j : status.jobs()) {
    std::printf(
        "  job %-4lld %-12s %-17s %d client(s), epoch %llu: %lld/%lld splits, %s samples/s, "
        "waiting %.0f%% of the time, needs %d worker(s)\n",
        static_cast<long long>(j.job_id()), j.job_name().empty() ? "-" : absl::Utf8SafeCEscape(j.job_name()).c_str(),
        ProcessingMode_Name(j.mode()).c_str(), j.clients(), static_cast<unsigned long long>(j.epoch()),
        static_cast<long long>(j.splits_completed()), static_cast<long long>(j.num_splits()),
        WithCommas(j.samples_per_s()).c_str(), 100 * j.wait_share(), j.workers_needed());
  }
  return absl::OkStatus();
}

// A process's series by pipeline: {pipeline: {"name" or "name/kind": value}}
// and the labels of its info series.
struct ProcessView {
  std::map<int, std::map<std::string, double>> values;
  std::map<int, std::map<std::string, std::string>> info;
  std::map<std::string, double> process;
};

ProcessView ViewOf(const std::vector<MetricSample>& samples) {
  ProcessView view;
  for (const MetricSample& s : samples) {
    auto pipeline = s.labels.find("pipeline");
    if (pipeline == s.labels.end()) {
      auto kind = s.labels.find("kind");
      view.process[kind == s.labels.end() ? s.name : s.name + "/" + kind->second] = s.value;
      continue;
    }
    const int p = std::atoi(pipeline->second.c_str());
    if (s.name == "sluice_placement_info" || s.name == "sluice_placement_last_decision_info") {
      for (const auto& [k, v] : s.labels) view.info[p][k] = v;
      continue;
    }
    auto kind = s.labels.find("kind");
    auto placement = s.labels.find("placement");
    std::string key = s.name;
    if (kind != s.labels.end()) key += "/" + kind->second;
    if (placement != s.labels.end()) key += "/" + placement->second;
    view.values[p][key] = s.value;
  }
  return view;
}

// The process's holdings beside the pipelines' pools, as pipe.memory()
// counts them in each pipeline's "held": "columnar 14.9 MB, ...", those
// that hold any, and their sum.
std::pair<std::string, double> BesidePools(std::map<std::string, double>& process) {
  std::vector<std::string> parts;
  double sum = 0;
  for (const char* kind : {"arrays", "columnar", "mapped_files", "object_blocks", "python_shared", "staging"}) {
    const double bytes = process[absl::StrCat("sluice_process_engine_bytes/", kind)];
    if (bytes <= 0) continue;
    parts.push_back(absl::StrFormat("%s %.1f MB", kind, bytes / 1e6));
    sum += bytes;
  }
  return {absl::StrJoin(parts, ", "), sum};
}

void PrintPipeline(int p, std::map<std::string, double>& v, std::map<std::string, std::string>& info,
                   std::map<std::string, double>& process) {
  const auto [beside, beside_bytes] = BesidePools(process);
  const double held = v["sluice_pipeline_engine_bytes/in_use"] + v["sluice_pipeline_engine_bytes/cached"] +
                      v["sluice_pipeline_engine_bytes/rings"] + beside_bytes;
  std::printf("  pipeline %d  %s: %s%s\n", p, info["mode"].c_str(), info["placement"].c_str(),
              info["chosen"] != info["placement"] ? (" (moving to " + info["chosen"] + ")").c_str() : "");
  std::printf("    delivered %s samples in %s elements; its consumer waited %.1f s\n",
              WithCommas(v["sluice_pipeline_samples_total"]).c_str(),
              WithCommas(v["sluice_pipeline_elements_total"]).c_str(), v["sluice_pipeline_wait_seconds_total"]);
  std::printf("    engine: %.1f MB held (%.1f MB in use, %.1f MB cached, %.1f MB rings%s%s), budget %s\n", held / 1e6,
              v["sluice_pipeline_engine_bytes/in_use"] / 1e6, v["sluice_pipeline_engine_bytes/cached"] / 1e6,
              v["sluice_pipeline_engine_bytes/rings"] / 1e6, beside.empty() ? "" : "; the process's ", beside.c_str(),
              InBinaryUnits(static_cast<int64_t>(v["sluice_pipeline_memory_budget_bytes"])).c_str());
  if (v.count("sluice_placement_window_samples_per_second") > 0) {
    std::printf(
        "    last window: %s samples/s, the trainer waited %.0f%%, the engine on %.1f cores, the trainer on %.1f\n",
        WithCommas(v["sluice_placement_window_samples_per_second"]).c_str(),
        100 * v["sluice_placement_window_trainer_wait_share"], v["sluice_placement_window_engine_cores"],
        v["sluice_placement_window_trainer_cores"]);
  }
  if (info["mode"] == "auto") {
    const auto latest = info.find("decision");
    std::printf("    %.0f decision(s)%s%s\n", v["sluice_placement_decisions_total"],
                latest != info.end() ? "; the latest: " : "", latest != info.end() ? latest->second.c_str() : "");
  }
}

absl::Status ShowProcess(const StatusArgs& args) {
  SLUICE_ASSIGN_OR_RETURN(const std::vector<MetricSample> samples, ScrapeMetrics(args.process));
  // A server's endpoint has no pipelines: it read as an idle trainer. (A
  // dispatcher's also has series of its workers.)
  const auto has = [&](absl::string_view prefix) {
    return std::any_of(samples.begin(), samples.end(),
                       [&](const MetricSample& s) { return absl::StartsWith(s.name, prefix); });
  };
  const char* server = has("sluice_journal_bytes") ? "dispatcher" : has("sluice_worker_") ? "worker" : nullptr;
  if (server != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.process, " serves a ", server,
                     "'s metrics, not a training process's: `sluice status --dispatcher HOST:PORT` (the "
                     "dispatcher's gRPC port) shows the service's workers and jobs"));
  }
  if (!has("sluice_process_resident_bytes")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "http://", args.process,
        "/metrics answered, but with no training process's metrics (sluice_process_resident_bytes): is it the "
        "address of sluice.serve_metrics() or `sluice run --metrics-port`?"));
  }
  ProcessView view = ViewOf(samples);
  if (args.json) {
    nlohmann::json j = {{"process", view.process}, {"pipelines", nlohmann::json::array()}};
    for (auto& [p, values] : view.values) {
      j["pipelines"].push_back({{"pipeline", p}, {"values", values}, {"labels", view.info[p]}});
    }
    std::printf("%s\n", j.dump().c_str());
    return absl::OkStatus();
  }
  std::printf("process %s: %zu pipeline(s), %.1f MB resident, %.1f CPU s\n", args.process.c_str(), view.values.size(),
              view.process["sluice_process_resident_bytes"] / 1e6, view.process["sluice_process_cpu_seconds_total"]);
  for (auto& [p, values] : view.values) PrintPipeline(p, values, view.info[p], view.process);
  return absl::OkStatus();
}

}  // namespace

void AddStatusCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<StatusArgs>();
  CLI::App* cmd = app.add_subcommand(
      "status", "Show a dispatcher's workers, jobs and throughput, or a training process's pipelines");
  CLI::Option* dispatcher = cmd->add_option("--dispatcher", args->dispatcher, "the dispatcher, HOST:PORT");
  CLI::Option* process =
      cmd->add_option("--process", args->process,
                      "a training process's metrics, HOST:PORT (sluice.serve_metrics, sluice run --metrics-port): each "
                      "pipeline's deliveries, memory and placement");
  dispatcher->excludes(process);
  cmd->add_flag("--json", args->json, "print the status as JSON");
  AddSecurityFlags(cmd, &args->security, /*server=*/false);
  cmd->callback([args, result] {
    if (args->dispatcher.empty() && args->process.empty()) {
      *result = absl::InvalidArgumentError("say which: --dispatcher HOST:PORT or --process HOST:PORT");
      return;
    }
    *result = args->process.empty() ? Show(*args) : ShowProcess(*args);
  });
}

}  // namespace sluice::cli
