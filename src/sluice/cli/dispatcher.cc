// sluice dispatcher --port P [--work-dir DIR]: the service's dispatcher.
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "sluice/cli/command.h"
#include "sluice/cli/serve.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/resource_limits.h"
#include "sluice/service/dispatcher_server.h"
#include "sluice/service/journal.h"
#include "sluice/service/log.h"

namespace sluice::cli {
namespace {

struct DispatcherArgs {
  std::string host = kDefaultHost;
  int port = 0;
  std::string work_dir;
  double worker_timeout_s = 5;
  double client_timeout_s = 5;
  double split_lease_s = 30;
  double idle_pipeline_timeout_s = 600;
  int max_split_failures = 3;
  uint64_t journal_compact_bytes = service::Journal::Options().compact_bytes;
  int metrics_port = -1;
  int exit_with = 0;
  bool no_python = false;
  graph::ResourceLimits limits;
  SecurityFlags security;
};

absl::Status Serve(const DispatcherArgs& args) {
  if (args.exit_with > 0) SLUICE_RETURN_IF_ERROR(ExitWithParent(args.exit_with));
  service::DispatcherOptions options;
  options.host = args.host;
  options.port = args.port;
  options.work_dir = args.work_dir;
  options.timeouts.worker_timeout = absl::Seconds(args.worker_timeout_s);
  options.timeouts.client_timeout = absl::Seconds(args.client_timeout_s);
  options.timeouts.splits.lease = absl::Seconds(args.split_lease_s);
  options.timeouts.splits.max_failures = args.max_split_failures;
  options.timeouts.idle_pipeline_timeout = absl::Seconds(args.idle_pipeline_timeout_s);
  options.limits = args.limits;
  options.journal.compact_bytes = args.journal_compact_bytes;
  options.metrics_port = args.metrics_port;
  options.allow_python = !args.no_python;
  SLUICE_ASSIGN_OR_RETURN(options.security, args.security.Options(args.host, "dispatcher"));
  BlockTerminationSignals();
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<service::DispatcherServer> server, service::DispatcherServer::Start(options));
  // Scripts and tests read the port from here when --port is 0.
  std::printf("dispatcher listening on port %d\n", server->port());
  if (server->metrics_port() >= 0) std::printf("metrics on port %d\n", server->metrics_port());
  std::fflush(stdout);
  const std::string signal = WaitForTermination();
  service::LogRoutine("dispatcher", absl::StrCat(signal, ": shutting down"));
  // A registration listing an object store that does not answer retries
  // for SLUICE_OBJECT_STORE_TIMEOUT_S; the journal holds all it would keep.
  ExitIfStuckAfter(absl::Seconds(10), "dispatcher", "a request (a store's listing?)");
  server->Stop();
  return absl::OkStatus();
}

}  // namespace

void AddDispatcherCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<DispatcherArgs>();
  CLI::App* cmd =
      app.add_subcommand("dispatcher", "Run the service's dispatcher: pipelines, jobs, workers, split assignment");
  cmd->add_option("--host", args->host,
                  "address to listen on (0.0.0.0: every interface; needs TLS and a token, or --insecure)")
      ->default_val(kDefaultHost);
  cmd->add_option("--port", args->port, "port to listen on (0: any free port, printed)")
      ->default_val(0)
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--work-dir", args->work_dir,
                  "directory for the journal; a restart with the same one recovers pipelines, jobs "
                  "and split progress");
  cmd->add_option("--worker-timeout", args->worker_timeout_s,
                  "seconds without a heartbeat before a worker counts as lost")
      ->default_val(5)
      ->check(kPositive);
  cmd->add_option("--client-timeout", args->client_timeout_s,
                  "seconds without a heartbeat before a consumer counts as gone and its splits go to the job's "
                  "other consumers")
      ->default_val(5)
      ->check(kPositive);
  cmd->add_option("--split-lease", args->split_lease_s,
                  "seconds a split in flight stays assigned without its worker reporting it running; then it "
                  "runs again")
      ->default_val(30)
      ->check(kPositive);
  cmd->add_option("--max-split-failures", args->max_split_failures,
                  "times a split may break (its worker lost, its stream broken) before it fails the epoch, or "
                  "is skipped under on_corrupt \"skip\"")
      ->default_val(3)
      ->check(kPositive);
  cmd->add_option("--idle-pipeline-timeout", args->idle_pipeline_timeout_s,
                  "seconds after which a registered pipeline that no job uses is forgotten")
      ->default_val(600)
      ->check(kPositive);
  cmd->add_option("--journal-compact-bytes", args->journal_compact_bytes,
                  "rewrite the journal as a snapshot of the state once it grows past this many bytes")
      ->default_val(args->journal_compact_bytes)
      ->check(kPositive);
  const graph::ResourceLimits defaults;
  cmd->add_option("--max-batch-bytes", args->limits.max_batch_bytes,
                  "refuse pipelines whose samples or batches (their fixed-size columns) exceed this many bytes")
      ->default_val(defaults.max_batch_bytes)
      ->check(kPositive);
  cmd->add_option("--max-buffer-bytes", args->limits.max_buffer_bytes,
                  "refuse pipelines with a shuffle or prefetch node that would hold more bytes than this")
      ->default_val(defaults.max_buffer_bytes)
      ->check(kPositive);
  cmd->add_option("--max-threads", args->limits.max_threads,
                  "refuse pipelines asking for more threads (options.threads, a map's parallelism)")
      ->default_val(defaults.max_threads)
      ->check(kPositive);
  cmd->add_flag("--no-python", args->no_python,
                "refuse pipelines with Python code (a python op, a Python dataset): code a consumer sends, which "
                "the workers would run");
  cmd->add_option("--metrics-port", args->metrics_port,
                  "serve Prometheus metrics on http://HOST:PORT/metrics (0: any free port, printed; default: none)")
      ->check(CLI::Range(0, 65535));
  AddExitWithOption(cmd, &args->exit_with);
  AddQuietFlag(cmd);
  AddSecurityFlags(cmd, &args->security);
  cmd->callback([args, result] { *result = Serve(*args); });
}

}  // namespace sluice::cli
