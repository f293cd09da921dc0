#include "sluice/service/server_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::service {

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(const std::string& binary,
                                                                    const std::vector<std::string>& args) {
  int out[2];
  if (::pipe(out) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> argv_strings{binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {  // the child: dies with the parent
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::unique_ptr<ServerProcess> process(new ServerProcess());
  process->pid_ = pid;
  process->stdout_ = out[0];
  std::string line;
  char c;
  pollfd p{out[0], POLLIN, 0};
  while (line.empty() || line.back() != '\n') {
    if (::poll(&p, 1, 30000) <= 0 || ::read(out[0], &c, 1) != 1) {
      return absl::DeadlineExceededError(
          absl::StrCat("no port announced by `", binary, " ", args.empty() ? "" : args[0], "`: ", line));
    }
    line.push_back(c);
  }
  const size_t at = line.rfind(' ');
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(at + 1)), &process->port_)) {
    return absl::InternalError(absl::StrCat("unexpected announcement: ", line));
  }
  return process;
}

int ServerProcess::Stop(int signal) {
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

ServerProcess::~ServerProcess() { Stop(SIGKILL); }

}  // namespace sluice::service
