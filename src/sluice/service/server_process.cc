#include "sluice/service/server_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "sluice/core/wait_child.h"

namespace sluice::service {

namespace {

// Forks every server on one thread that lives as long as the process: a
// child's PR_SET_PDEATHSIG fires when the thread that forked it ends, not
// the process, and a server must outlive the thread that started it (a
// pool's, a Python thread).
class Spawner {
 public:
  static Spawner& Get() {
    static Spawner* spawner = new Spawner();  // never destroyed: its thread runs to exit
    return *spawner;
  }

  // fork()s on the spawner's thread and runs `child` in the child.
  pid_t Fork(const std::function<void()>& child) {
    absl::MutexLock one_at_a_time(&call_mu_);
    absl::MutexLock lock(&mu_);
    request_ = &child;
    mu_.Await(absl::Condition(+[](Spawner* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->request_ == nullptr; }, this));
    return pid_;
  }

 private:
  Spawner() {
    std::thread([this] {
      absl::MutexLock lock(&mu_);
      while (true) {
        mu_.Await(absl::Condition(+[](const std::function<void()>** r) { return *r != nullptr; }, &request_));
        const pid_t pid = ::fork();
        if (pid == 0) (*request_)();  // does not return
        pid_ = pid;
        request_ = nullptr;
      }
    }).detach();
  }

  absl::Mutex call_mu_;
  absl::Mutex mu_;
  const std::function<void()>* request_ ABSL_GUARDED_BY(mu_) = nullptr;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

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
  const pid_t pid = Spawner::Get().Fork([&] {  // the child: dies with the parent
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  });
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    return absl::InternalError(absl::StrCat("cannot start ", binary, ": fork failed"));
  }
  ::close(out[1]);
  std::unique_ptr<ServerProcess> process(new ServerProcess());
  process->pid_ = pid;
  process->stdout_ = out[0];
  std::string line;
  char c;
  pollfd p{out[0], POLLIN, 0};
  while (line.empty() || line.back() != '\n') {
    int ready;
    do {
      ready = ::poll(&p, 1, 30000);
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0 || ::read(out[0], &c, 1) != 1) {
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
    WaitChild(pid_, &status, 0);
    pid_ = -1;
  }
  if (stdout_ >= 0) ::close(stdout_);
  stdout_ = -1;
  return status;
}

ServerProcess::~ServerProcess() { Stop(SIGKILL); }

}  // namespace sluice::service
