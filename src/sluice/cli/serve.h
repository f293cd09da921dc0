// Shared by `sluice dispatcher` and `sluice worker`: the security flags and
// running a server until SIGTERM or SIGINT.
#ifndef SLUICE_CLI_SERVE_H_
#define SLUICE_CLI_SERVE_H_

#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "sluice/service/security.h"

namespace sluice::cli {

// Where servers listen unless told: this machine only.
inline constexpr char kDefaultHost[] = "127.0.0.1";

struct SecurityFlags {
  std::string cert_file, key_file, ca_file, token_file, callers_file;
  bool require_client_cert = false;
  bool insecure = false;
  // The options these flags give; reads the token file. A server listening
  // on `host` beyond loopback needs TLS and a token, or --insecure (then
  // `role` logs a warning); clients leave both out.
  absl::StatusOr<service::SecurityOptions> Options(const std::string& host = kDefaultHost,
                                                   const std::string& role = "") const;
};

// --tls-cert, --tls-key, --tls-ca and --token-file; a server's also
// --tls-require-client-cert, --callers and --insecure.
void AddSecurityFlags(CLI::App* cmd, SecurityFlags* flags, bool server = true);

// Blocks SIGTERM and SIGINT in every thread started after it, so the
// servers' threads leave them to WaitForTermination. Call before starting.
void BlockTerminationSignals();
// Waits for SIGTERM or SIGINT; returns its name.
std::string WaitForTermination();

// Exits this process (status 1) after `grace` unless it has exited before,
// logging as `role` that `what` was stuck: a request or stream blocked in a
// kernel or a store's retries must not keep a stopping server alive. What a
// server journals survives this as it survives a crash.
void ExitIfStuckAfter(absl::Duration grace, const std::string& role, const std::string& what);

// Has the kernel kill this process (SIGKILL) when its parent, process
// `parent_pid`, exits: a supervisor that restarts it (a Ray actor) must
// never leave it serving on its own. Strictly, when the parent's thread
// that started it exits: the supervisor must start it from a thread that
// lives as long as it (a Ray actor's main thread). Fails if that process is
// not the parent (it died already, or the pid is wrong).
absl::Status ExitWithParent(int parent_pid);
// --exit-with PID, for ExitWithParent.
void AddExitWithOption(CLI::App* cmd, int* parent_pid);
// --quiet: routine events are not logged (service::SetRoutineLogging).
void AddQuietFlag(CLI::App* cmd);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_SERVE_H_
