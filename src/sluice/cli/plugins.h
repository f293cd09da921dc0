// The --plugin option of the subcommands that compile pipelines (run,
// profile, materialize, ops, worker): op plugins loaded into the process's
// registry before anything else happens.
#ifndef SLUICE_CLI_PLUGINS_H_
#define SLUICE_CLI_PLUGINS_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace sluice::cli {

// Adds `--plugin PATH` (repeatable) to `cmd`, collecting into *paths.
void AddPluginOption(CLI::App* cmd, std::vector<std::string>* paths);

// Loads each plugin; the first failure names the file.
absl::Status LoadPlugins(const std::vector<std::string>& paths);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_PLUGINS_H_
