#include "test_cluster.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::testing {

absl::StatusOr<std::unique_ptr<ServiceProcess>> ServiceProcess::Start(const std::vector<std::string>& args) {
  const char* bin = std::getenv("SLUICE_BIN");
  if (bin == nullptr) return absl::FailedPreconditionError("SLUICE_BIN is not set");
  int out[2];
  if (::pipe(out) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> argv_strings{bin};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    ::execv(bin, argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  auto process = std::unique_ptr<ServiceProcess>(new ServiceProcess());
  process->pid_ = pid;
  // Read the announcement: "<who> listening on port N\n", within 30 s.
  std::string line;
  char c;
  pollfd p{out[0], POLLIN, 0};
  while (line.empty() || line.back() != '\n') {
    if (::poll(&p, 1, 30000) <= 0 || ::read(out[0], &c, 1) != 1) {
      process->stdout_ = out[0];
      return absl::DeadlineExceededError(absl::StrCat("no port announced by `sluice ", args[0], "`: ", line));
    }
    line.push_back(c);
  }
  process->stdout_ = out[0];
  const size_t at = line.rfind(' ');
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(at + 1)), &process->port_)) {
    return absl::InternalError(absl::StrCat("unexpected announcement: ", line));
  }
  return process;
}

int ServiceProcess::Stop(int signal) {
  int status = -1;
  if (pid_ > 0) {
    ::kill(pid_, signal);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  if (stdout_ >= 0) ::close(stdout_);
  stdout_ = -1;
  return status;
}

ServiceProcess::~ServiceProcess() { Stop(SIGKILL); }

absl::Status TestCluster::StartDispatcher(const std::string& work_dir, int port) {
  std::vector<std::string> args{"dispatcher", "--host", "127.0.0.1", "--port", std::to_string(port),
                                "--worker-timeout", "2"};
  if (!work_dir.empty()) args.insert(args.end(), {"--work-dir", work_dir});
  args.insert(args.end(), flags_.begin(), flags_.end());
  auto started = ServiceProcess::Start(args);
  if (!started.ok()) return started.status();
  dispatcher_ = *std::move(started);
  dispatcher_port_ = dispatcher_->port();
  return absl::OkStatus();
}

absl::Status TestCluster::AddWorker(int threads) {
  std::vector<std::string> args{"worker", "--dispatcher", address(), "--host", "127.0.0.1",
                                "--threads", std::to_string(threads)};
  args.insert(args.end(), flags_.begin(), flags_.end());
  auto started = ServiceProcess::Start(args);
  if (!started.ok()) return started.status();
  workers_.push_back(*std::move(started));
  return absl::OkStatus();
}

absl::Status TestCluster::RestartDispatcher(int signal, const std::string& work_dir) {
  dispatcher_->Stop(signal);
  return StartDispatcher(work_dir, dispatcher_port_);
}

}  // namespace sluice::testing
