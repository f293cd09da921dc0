// Shared by `sluice dispatcher` and `sluice worker`: the security flags and
// running a server until SIGTERM or SIGINT.
#ifndef SLUICE_CLI_SERVE_H_
#define SLUICE_CLI_SERVE_H_

#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "sluice/service/security.h"

namespace sluice::cli {

struct SecurityFlags {
  std::string cert_file, key_file, ca_file, token_file;
  bool require_client_cert = false;
  // The options these flags give; reads the token file.
  absl::StatusOr<service::SecurityOptions> Options() const;
};

// --tls-cert, --tls-key, --tls-ca, --tls-require-client-cert, --token-file.
void AddSecurityFlags(CLI::App* cmd, SecurityFlags* flags);

// Blocks SIGTERM and SIGINT in every thread started after it, so the
// servers' threads leave them to WaitForTermination. Call before starting.
void BlockTerminationSignals();
// Waits for SIGTERM or SIGINT; returns its name.
std::string WaitForTermination();

}  // namespace sluice::cli

#endif  // SLUICE_CLI_SERVE_H_
