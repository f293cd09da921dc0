#include "sluice/cli/plugins.h"

#include "sluice/core/status_macros.h"
#include "sluice/ops/plugin.h"

namespace sluice::cli {

void AddPluginOption(CLI::App* cmd, std::vector<std::string>* paths) {
  // One path per --plugin, so that a positional after it (`ops --plugin X
  // NAME`) is not taken for a second plugin.
  cmd->add_option("--plugin", *paths, "an op plugin (.so built against this sluice) to load first; repeat for several")
      ->allow_extra_args(false);
}

absl::Status LoadPlugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) SLUICE_RETURN_IF_ERROR(ops::LoadPlugin(path));
  return absl::OkStatus();
}

}  // namespace sluice::cli
