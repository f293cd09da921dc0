// sluice status --dispatcher HOST:P: workers, jobs and throughput.
#include <cstdio>

#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"
#include "sluice/cli/command.h"
#include "sluice/cli/progress.h"
#include "sluice/cli/serve.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/fetch_status.h"

namespace sluice::cli {
namespace {

struct StatusArgs {
  std::string dispatcher;
  bool json = false;
  SecurityFlags security;
};

absl::Status Show(const StatusArgs& args) {
  SLUICE_ASSIGN_OR_RETURN(service::SecurityOptions security, args.security.Options());
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
        static_cast<long long>(j.job_id()), j.job_name().empty() ? "-" : j.job_name().c_str(),
        ProcessingMode_Name(j.mode()).c_str(), j.clients(), static_cast<unsigned long long>(j.epoch()),
        static_cast<long long>(j.splits_completed()), static_cast<long long>(j.num_splits()),
        WithCommas(j.samples_per_s()).c_str(), 100 * j.wait_share(), j.workers_needed());
  }
  return absl::OkStatus();
}

}  // namespace

void AddStatusCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<StatusArgs>();
  CLI::App* cmd = app.add_subcommand("status", "Show a dispatcher's workers, jobs and throughput");
  cmd->add_option("--dispatcher", args->dispatcher, "the dispatcher, HOST:PORT")->required();
  cmd->add_flag("--json", args->json, "print the status as JSON");
  AddSecurityFlags(cmd, &args->security);
  cmd->callback([args, result] { *result = Show(*args); });
}

}  // namespace sluice::cli
