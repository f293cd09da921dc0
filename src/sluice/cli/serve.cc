#include "sluice/cli/serve.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/cli/command.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/log.h"

namespace sluice::cli {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

bool Loopback(const std::string& host) {
  return absl::StartsWith(host, "127.") || host == "::1" || host == "[::1]" || host == "localhost";
}

}  // namespace

absl::StatusOr<service::SecurityOptions> SecurityFlags::Options(const std::string& host,
                                                                const std::string& role) const {
  const bool tokens = !token_file.empty() || !callers_file.empty();
  const bool open = cert_file.empty() || !tokens;
  if (!Loopback(host) && open) {
    const std::string risk =
        absl::StrCat("--host ", host, " listens beyond this machine without ",
                     cert_file.empty() && !tokens ? "TLS or a token"
                     : cert_file.empty()          ? "TLS"
                                                  : "a token",
                     ": anyone who reaches the port can register pipelines, read their data and impersonate workers");
    if (!insecure) {
      return absl::InvalidArgumentError(
          absl::StrCat(risk, "; give --tls-cert/--tls-key and --token-file, or --insecure on a network you trust"));
    }
    service::Log(role, absl::StrCat("WARNING: ", risk, " (--insecure)"));
  }
  service::SecurityOptions options;
  options.cert_file = cert_file;
  options.key_file = key_file;
  options.ca_file = ca_file;
  options.require_client_cert = require_client_cert;
  if (!token_file.empty()) SLUICE_RETURN_IF_ERROR(options.ReadTokenFile(token_file));
  if (!callers_file.empty()) SLUICE_RETURN_IF_ERROR(options.ReadCallersFile(callers_file));
  return options;
}

void AddSecurityFlags(CLI::App* cmd, SecurityFlags* flags, bool server) {
  cmd->add_option("--tls-cert", flags->cert_file,
                  server ? "this server's certificate chain (PEM): turns TLS on; also presented when dialing, "
                           "for mutual TLS"
                         : "a certificate chain (PEM) presented when dialing, for mutual TLS");
  cmd->add_option("--tls-key", flags->key_file, "the private key of --tls-cert (PEM)");
  cmd->add_option("--tls-ca", flags->ca_file,
                  "the CA that signs the service's certificates: dial other servers with TLS");
  cmd->add_option("--token-file", flags->token_file,
                  server ? "a file holding the token this process presents; without --callers, the shared token "
                           "every call to it must carry too"
                         : "a file holding the token this process presents");
  if (!server) return;
  cmd->add_flag("--tls-require-client-cert", flags->require_client_cert,
                "mutual TLS: refuse callers without a certificate signed by --tls-ca");
  cmd->add_option("--callers", flags->callers_file,
                  "who may call this server: lines \"ROLE NAME TOKEN\" (ROLE client, worker or admin; a client's "
                  "NAME is its tenant, which sees only its own jobs)");
  cmd->add_flag("--insecure", flags->insecure,
                "allow listening beyond loopback (--host) without TLS and a token; logs a warning");
}

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::string WaitForTermination() {
  sigset_t set = TerminationSignals();
  int sig = 0;
  sigwait(&set, &sig);
  return sig == SIGTERM ? "SIGTERM" : "SIGINT";
}

void ExitIfStuckAfter(absl::Duration grace, const std::string& role, const std::string& what) {
  std::thread([grace, role, what] {
    absl::SleepFor(grace);
    service::Log(
        role, absl::StrCat(what, " is stuck ", absl::FormatDuration(grace), " after the signal: exiting without it"));
    std::_Exit(1);
  }).detach();
}

absl::Status ExitWithParent(int parent_pid) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    return absl::InternalError(absl::StrCat("--exit-with: prctl(PR_SET_PDEATHSIG): ", std::strerror(errno)));
  }
  // Checked after arming: a parent that died before is seen here.
  if (getppid() != parent_pid) {
    return absl::FailedPreconditionError(absl::StrCat("--exit-with ", parent_pid, ": this process's parent is ",
                                                      getppid(), " (has process ", parent_pid, " exited?)"));
  }
  return absl::OkStatus();
}

void AddExitWithOption(CLI::App* cmd, int* parent_pid) {
  cmd->add_option("--exit-with", *parent_pid,
                  "the pid of this process's parent, its supervisor (a Ray actor, a training rank): exit at once "
                  "when it does")
      ->check(kPositive);
}

void AddQuietFlag(CLI::App* cmd) {
  cmd->add_flag_callback(
      "--quiet", [] { service::SetRoutineLogging(false); },
      "log only what goes wrong or needs a look (lost workers, failures, warnings), not routine events (listening, "
      "joins)");
}

}  // namespace sluice::cli
