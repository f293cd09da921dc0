// sluice profile PIPELINE.json: where the pipeline's bottleneck is, in plain
// words with numbers, and which lever to pull.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "sluice/cli/command.h"
#include "sluice/cli/pipeline_runner.h"
#include "sluice/cli/plugins.h"
#include "sluice/cli/progress.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/io/arrow_source.h"
#include "sluice/profile/profiler.h"
#include "sluice/profile/report_html.h"
#include "sluice/profile/report_json.h"
#include "sluice/profile/trace_writer.h"

namespace sluice::cli {
namespace {

struct ProfileArgs {
  std::string pipeline;
  double consumer_rate = 0;
  double target_rate = 0;
  double seconds = 3;
  int threads = 0;
  std::string trace;
  std::string report;
  bool no_ablation = false;
  bool json = false;
  std::vector<std::string> plugins;
};

// Said before any measuring, rather than after a run of many seconds.
absl::Status CheckCanWrite(const std::string& path, const char* flag) {
  if (path.empty()) return absl::OkStatus();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(flag, " ", path, ": there is no directory ", dir));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(flag, " ", path, ": cannot write in ", dir));
  }
  return absl::OkStatus();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Under placement "auto": the pipeline run through its placement long
// enough for a move and its judgement (windows of 2 s), this command its
// consumer (no trainer in the process), and what was decided and why.
// Columns as wide as the data (a fused op's name is long), counted in
// characters: "·" is two bytes.
size_t Columns(const std::string& utf8) {
  return std::count_if(utf8.begin(), utf8.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

void PrintOpTable(const std::vector<profile::OpCost>& ops) {
  std::vector<std::string> names;
  size_t width = Columns("node · op");
  for (const profile::OpCost& op : ops) {
    names.push_back(op.node_name + " · " + op.op_name + (op.view ? " (view)" : ""));
    width = std::max(width, Columns(names.back()));
  }
  const auto padded = [&](const std::string& name) { return name + std::string(width - Columns(name), ' '); };
  std::printf("%s %10s %7s %13s\n", padded("node · op").c_str(), "core-s/1k", "CPU", "without it/s");
  for (size_t i = 0; i < ops.size(); ++i) {
    std::printf("%s %10.4f %6.1f%% %13s\n", padded(names[i]).c_str(), ops[i].core_s_per_1k, 100 * ops[i].cpu_share,
                ops[i].ablated_samples_per_s > 0 ? profile::ShortRate(ops[i].ablated_samples_per_s).c_str() : "-");
  }
}

absl::StatusOr<placement::Report> PlacementRun(const PipelineDef& def, double seconds) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<placement::PlacedPipeline> pipeline, placement::PlacedPipeline::Create(def));
  if (!pipeline->automatic()) return pipeline->report();
  std::fprintf(stderr, "measuring placement auto for %.0f s\n", seconds);
  RunOptions options;
  options.min_seconds = seconds;
  options.progress = false;
  SLUICE_RETURN_IF_ERROR(RunPipeline(*pipeline, options).status());
  return pipeline->report();
}

std::string JsonWithPlacement(const profile::ProfileResult& r, const placement::Report& placed) {
  nlohmann::json j = nlohmann::json::parse(profile::JsonReport(r));
  j["placement"] = nlohmann::json::parse(placed.ToJson());
  return j.dump();
}

absl::Status Profile(const ProfileArgs& args) {
  SLUICE_RETURN_IF_ERROR(CheckCanWrite(args.trace, "--trace"));
  SLUICE_RETURN_IF_ERROR(CheckCanWrite(args.report, "--report"));
  SLUICE_RETURN_IF_ERROR(LoadPlugins(args.plugins));
  SLUICE_ASSIGN_OR_RETURN(PipelineDef def, graph::PipelineFromJsonFile(args.pipeline));
  if (args.threads > 0) def.mutable_options()->set_threads(args.threads);
  profile::ProfileOptions options;
  options.seconds = args.seconds;
  options.short_seconds = std::max(0.5, args.seconds / 3);
  options.consumer_samples_per_s = args.consumer_rate;
  options.target_samples_per_s = args.target_rate;
  options.ablation = !args.no_ablation;
  options.trace = !args.trace.empty();
  absl::StatusOr<profile::ProfileResult> result = profile::RunProfile(
      def, options, [](const std::string& line) { std::fprintf(stderr, "measuring %s\n", line.c_str()); });
  if (!result.ok()) return WithContext(result.status(), args.pipeline);
  const profile::ProfileResult& r = *result;
  constexpr double kLeastPlacementSeconds = 12;
  absl::StatusOr<placement::Report> placed = PlacementRun(def, std::max(kLeastPlacementSeconds, 4 * args.seconds));
  if (!placed.ok()) return WithContext(placed.status(), args.pipeline);
  if (!args.trace.empty()) SLUICE_RETURN_IF_ERROR(WriteText(args.trace, profile::ChromeTraceJson(r)));
  if (!args.report.empty()) SLUICE_RETURN_IF_ERROR(WriteText(args.report, profile::HtmlReport(r)));

  std::printf("%s\n\n", r.verdict.summary.c_str());
  if (!r.note.empty()) std::printf("(%s)\n\n", r.note.c_str());
  PrintOpTable(r.findings.ops);
  std::printf("\nsource alone: %s samples/s; CPU per sample: %.1f core-µs\n",
              profile::ShortRate(r.findings.input_only_samples_per_s).c_str(), r.findings.cpu_s_per_sample * 1e6);
  std::printf("memory: budget %s; the engine's buffers held at most %.1f MB (%.1f MB in use at once)",
              InBinaryUnits(r.full.memory_budget).c_str(), r.full.memory.peak_held_bytes / 1e6,
              r.full.memory.peak_live_bytes / 1e6);
  if (const int64_t columnar = io::ColumnarPeakBytes(); columnar > 0) {
    std::printf("; at most %.1f MB of decoded row groups", columnar / 1e6);
  }
  std::printf("\n");
  if (!r.verdict.levers.empty()) std::printf("\nlevers:\n");
  for (const profile::Lever& l : r.verdict.levers) {
    std::printf("  - %s%s (%s)\n", l.action.c_str(),
                l.predicted_samples_per_s > 0
                    ? absl::StrCat(": predicted ", profile::ShortRate(l.predicted_samples_per_s), " samples/s").c_str()
                    : "",
                l.why.c_str());
  }
  if (!r.full.tuned.empty()) {
    std::printf("\nautotune:");
    for (const exec::Knob& k : r.full.tuned) {
      std::printf(" %s %s %lld;", k.node_name.c_str(),
                  k.kind == exec::Knob::Kind::kParallelism ? "parallelism" : "depth", static_cast<long long>(k.value));
    }
    std::printf("\n");
    for (const std::string& change : r.full.tune_log) std::printf("  - %s\n", change.c_str());
  }
  std::printf("\n%s%s", placed->automatic ? "with this command as the consumer (no trainer in its process):\n" : "",
              placed->ToText().c_str());
  if (!args.trace.empty()) std::printf("trace: %s (open in Perfetto or chrome://tracing)\n", args.trace.c_str());
  if (!args.report.empty()) std::printf("report: %s\n", args.report.c_str());
  if (args.json) std::printf("%s\n", JsonWithPlacement(r, *placed).c_str());
  return absl::OkStatus();
}

}  // namespace

void AddProfileCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile", "Find a pipeline's bottleneck: per-op cost, ablation, the trainer's view, and what to do about it");
  cmd->add_option("pipeline", args->pipeline, "pipeline definition (JSON)")->required();
  cmd->add_option("--consumer-rate", args->consumer_rate,
                  "samples/s the trainer takes (measure it with a cached batch); the verdict says whether the job "
                  "is input-bound")
      ->check(kNonNegative);
  cmd->add_option("--target-rate", args->target_rate, "samples/s wanted (default: the consumer rate)")
      ->check(kNonNegative);
  cmd->add_option("--seconds", args->seconds, "seconds of the whole-pipeline run (the other runs take a third)")
      ->default_val(3)
      ->check(kPositive);
  cmd->add_option("--threads", args->threads, "compute threads (default: the pipeline's, or all cores)")
      ->check(kThreadCount);
  cmd->add_option("--trace", args->trace, "write a Chrome trace (JSON) of the whole-pipeline run");
  cmd->add_option("--report", args->report, "write a self-contained HTML report");
  cmd->add_flag("--no-ablation", args->no_ablation, "skip re-measuring with each op removed");
  cmd->add_flag("--json", args->json, "print the profile as one JSON object, last");
  AddPluginOption(cmd, &args->plugins);
  cmd->callback([args, result] { *result = Profile(*args); });
}

}  // namespace sluice::cli
