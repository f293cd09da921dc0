// sluice materialize PIPELINE.json --out DIR: write the output of the
// pipeline's deterministic prefix once, and a pipeline that reads it.
#include "sluice/profile/materialize.h"

#include <atomic>
#include <csignal>
#include <cstdio>

#include "absl/strings/str_join.h"
#include "sluice/cli/command.h"
#include "sluice/cli/plugins.h"
#include "sluice/cli/progress.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/pipeline_json.h"

namespace sluice::cli {
namespace {

struct MaterializeArgs {
  std::string pipeline;
  std::string out;
  std::vector<std::string> plugins;
};

// Set by Ctrl-C or SIGTERM: materializing stops between batches and removes
// what it wrote, leaving the output folder as it was.
std::atomic<bool> interrupted{false};

void StopOnInterrupt() {
  struct sigaction action = {};
  action.sa_handler = [](int) { interrupted.store(true); };
  action.sa_flags = SA_RESETHAND | SA_RESTART;  // a second Ctrl-C stops it at once
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

absl::Status Materialize(const MaterializeArgs& args) {
  SLUICE_RETURN_IF_ERROR(LoadPlugins(args.plugins));
  SLUICE_ASSIGN_OR_RETURN(PipelineDef def, graph::PipelineFromJsonFile(args.pipeline));
  ProgressLine progress(true);
  StopOnInterrupt();
  absl::StatusOr<profile::MaterializeResult> r = profile::Materialize(
      def, args.out,
      [&](int64_t records) { progress.Update([&] { return absl::StrCat(WithCommas(records), " records written"); }); },
      &interrupted);
  progress.Finish();
  if (!r.ok()) return WithContext(r.status(), args.pipeline);
  std::printf("materialized %s: %s records (%.1f MB) in %zu files under %s\n", absl::StrJoin(r->ops, ", ").c_str(),
              WithCommas(r->records).c_str(), r->bytes / 1e6, r->files.size(), args.out.c_str());
  std::printf("run it with: sluice run %s\n", r->pipeline_path.c_str());
  return absl::OkStatus();
}

}  // namespace

void AddMaterializeCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<MaterializeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "materialize",
      "Write the output of the pipeline's deterministic prefix (ops that draw no random numbers) to TFRecords "
      "once, and a rewritten pipeline that reads them (same output for the same seed)");
  cmd->add_option("pipeline", args->pipeline, "pipeline definition (JSON)")->required();
  cmd->add_option("--out", args->out, "directory for the records and pipeline.json")->required()->check(kNonEmpty);
  AddPluginOption(cmd, &args->plugins);
  cmd->callback([args, result] { *result = Materialize(*args); });
}

}  // namespace sluice::cli
