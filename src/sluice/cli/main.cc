// The `sluice` command line: one subcommand per file.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sluice/cli/command.h"
#include "sluice/core/mutex_checks.h"
#include "sluice/version.h"

int main(int argc, char** argv) {
  sluice::SkipDebugDeadlockChecks();  // the dispatcher's and workers' locks too
  // gRPC's own log lines (a port in use dumped its internal error record)
  // repeat what sluice says in one line; GRPC_VERBOSITY set shows them.
  setenv("GRPC_VERBOSITY", "NONE", /*overwrite=*/0);
  CLI::App app{
      "sluice: a fast input pipeline engine for deep-learning training.\n"
      "Runs read -> decode -> augment -> batch natively, in parallel, and measures it."};
  app.name("sluice");  // not argv[0] (a wheel's path) in usage lines
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("sluice ") + sluice::LibraryVersion());
  absl::Status result;
  sluice::cli::AddMakeDataCommand(app, &result);
  sluice::cli::AddRunCommand(app, &result);
  sluice::cli::AddProfileCommand(app, &result);
  sluice::cli::AddMaterializeCommand(app, &result);
  sluice::cli::AddInspectCommand(app, &result);
  sluice::cli::AddIndexCommand(app, &result);
  sluice::cli::AddOpsCommand(app, &result);
  sluice::cli::AddDispatcherCommand(app, &result);
  sluice::cli::AddWorkerCommand(app, &result);
  sluice::cli::AddStatusCommand(app, &result);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 says only "A subcommand is required" for a mistyped one.
    std::string known;
    bool listed = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      listed = listed || (argc > 1 && sub->get_name() == argv[1]);
    }
    if (argc > 1 && argv[1][0] != '-' && !listed) {
      std::fprintf(stderr, "sluice: unknown command '%s' (commands: %s; sluice --help)\n", argv[1], known.c_str());
      return 2;
    }
    return app.exit(e);
  }
  if (!result.ok()) {
    const std::string name = app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name();
    // No payloads: they are the engine's markers, not the user's business.
    std::fprintf(stderr, "sluice %s: error: %s\n", name.c_str(),
                 result.ToString(absl::StatusToStringMode::kWithNoExtraData).c_str());
    return 1;
  }
  return 0;
}
