// sluice worker --dispatcher HOST:P [--port Q] [--threads N]: a worker.
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "sluice/cli/command.h"
#include "sluice/cli/plugins.h"
#include "sluice/cli/serve.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/channel.h"
#include "sluice/service/log.h"
#include "sluice/service/worker_server.h"

namespace sluice::cli {
namespace {

struct WorkerArgs {
  std::string dispatcher;
  std::string host = kDefaultHost;
  int port = 0;
  std::string advertise;
  int threads = 0;
  SecurityFlags security;
  std::vector<std::string> plugins;
  double drain_timeout_s = 30;
  double idle_pipeline_timeout_s = 600;
  int metrics_port = -1;
  int exit_with = 0;
  bool no_python = false;
};

absl::Status Serve(const WorkerArgs& args) {
  // At once, as the Python client does: gRPC would retry a bad one forever.
  if (absl::Status bad = service::CheckAddress(args.dispatcher); !bad.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--dispatcher: ", bad.message()));
  }
  if (args.exit_with > 0) SLUICE_RETURN_IF_ERROR(ExitWithParent(args.exit_with));
  SLUICE_RETURN_IF_ERROR(LoadPlugins(args.plugins));
  service::WorkerServerOptions options;
  options.host = args.host;
  options.port = args.port;
  options.advertise_host = !args.advertise.empty() ? args.advertise : args.host == "0.0.0.0" ? "127.0.0.1" : args.host;
  options.worker.dispatcher = args.dispatcher;
  options.worker.threads = args.threads;
  options.worker.allow_python = !args.no_python;
  options.worker.pipeline_idle = absl::Seconds(args.idle_pipeline_timeout_s);
  options.metrics_port = args.metrics_port;
  SLUICE_ASSIGN_OR_RETURN(options.worker.security, args.security.Options(args.host, "worker"));
  // A wrong token never starts working: exit, so that a supervisor
  // (Kubernetes, Ray) shows the failure rather than a worker that never
  // serves.
  options.on_refused = [dispatcher = args.dispatcher](const absl::Status& why) {
    std::fprintf(stderr, "sluice worker: error: dispatcher %s refused this worker: %s\n", dispatcher.c_str(),
                 why.ToString().c_str());
    std::fflush(stderr);
    std::_Exit(1);
  };
  BlockTerminationSignals();
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<service::WorkerServer> server, service::WorkerServer::Start(options));
  std::printf("worker listening on port %d\n", server->port());
  if (server->metrics_port() >= 0) std::printf("metrics on port %d\n", server->metrics_port());
  std::fflush(stdout);
  const std::string signal = WaitForTermination();
  service::LogRoutine("worker", absl::StrCat(signal, ": finishing the splits in hand (at most ", args.drain_timeout_s,
                                             " s), then leaving"));
  ExitIfStuckAfter(absl::Seconds(args.drain_timeout_s + 5), "worker", "a stream (in a kernel?)");
  const int cut = server->Drain(absl::Seconds(args.drain_timeout_s));
  if (cut == 0) {
    service::LogRoutine("worker", "drained; stopped");
  } else {
    service::Log("worker", absl::StrCat("stopped; ", cut, " stream(s) cut off: their splits run again"));
  }
  return absl::OkStatus();
}

}  // namespace

void AddWorkerCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<WorkerArgs>();
  CLI::App* cmd =
      app.add_subcommand("worker", "Run a service worker: runs pipelines' parts before their distribute node");
  cmd->add_option("--dispatcher", args->dispatcher, "the dispatcher, HOST:PORT")->required();
  cmd->add_option("--host", args->host,
                  "address to listen on (0.0.0.0: every interface; needs TLS and a token, or --insecure)")
      ->default_val(kDefaultHost);
  cmd->add_option("--port", args->port, "port to listen on (0: any free port, printed)")
      ->default_val(0)
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--advertise", args->advertise,
                  "the host clients dial to reach this worker (default: --host, or 127.0.0.1)");
  cmd->add_option("--threads", args->threads, "compute threads per stream (default: all cores)")->check(kThreadCount);
  cmd->add_option("--drain-timeout", args->drain_timeout_s,
                  "on SIGTERM, seconds to let streams finish the split in hand before cutting them off")
      ->default_val(30)
      ->check(kPositive);
  cmd->add_option("--idle-pipeline-timeout", args->idle_pipeline_timeout_s,
                  "seconds after its last stream that a compiled pipeline is dropped (its memory given back)")
      ->default_val(600)
      ->check(kPositive);
  cmd->add_option("--metrics-port", args->metrics_port,
                  "serve Prometheus metrics on http://HOST:PORT/metrics (0: any free port, printed; default: none)")
      ->check(CLI::Range(0, 65535));
  AddExitWithOption(cmd, &args->exit_with);
  AddQuietFlag(cmd);
  cmd->add_flag("--no-python", args->no_python,
                "refuse pipelines with Python code (a python op, a Python dataset): code a consumer sends runs here, "
                "in $SLUICE_PYTHON (set by the installed `sluice` command to its environment's interpreter; else "
                "python3)");
  AddSecurityFlags(cmd, &args->security);
  AddPluginOption(cmd, &args->plugins);
  cmd->callback([args, result] { *result = Serve(*args); });
}

}  // namespace sluice::cli
