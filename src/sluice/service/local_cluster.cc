#include "sluice/service/local_cluster.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sluice/core/status_macros.h"
#include "sluice/core/wait_child.h"
#include "sluice/io/random_access_file.h"
#include "sluice/ops/plugin.h"
#include "sluice/service/log.h"

namespace sluice::service {
namespace {

// How long a stopping cluster's workers get to exit on their own.
constexpr absl::Duration kStopGrace = absl::Seconds(3);

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

}  // namespace

absl::StatusOr<std::string> FindSluiceBinary(const std::string& preferred) {
  if (!preferred.empty()) return preferred;
  if (const char* env = std::getenv("SLUICE_BINARY"); env != nullptr && *env != '\0') return std::string(env);
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    const std::string path(self, n);
    if (path.size() >= 7 && path.compare(path.size() - 7, 7, "/sluice") == 0) return path;
  }
  // Beside the library: <prefix>/lib/libsluice.so and <prefix>/bin/sluice
  // (the Python package keeps the same layout).
  Dl_info library;
  if (::dladdr(reinterpret_cast<void*>(&FindSluiceBinary), &library) != 0 && library.dli_fname != nullptr) {
    const std::string lib(library.dli_fname);
    const std::string candidate = lib.substr(0, lib.rfind('/') + 1) + "../bin/sluice";
    if (Executable(candidate)) return candidate;
  }
  if (const char* env_path = std::getenv("PATH"); env_path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(env_path, ':')) {
      const std::string candidate = absl::StrCat(dir, "/sluice");
      if (Executable(candidate)) return candidate;
    }
  }
  return absl::NotFoundError(
      "cannot find the `sluice` command to start local workers: put it on PATH or set SLUICE_BINARY");
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(int workers, int threads_per_worker,
                                                                  const std::string& sluice_binary) {
  SLUICE_ASSIGN_OR_RETURN(const std::string binary, FindSluiceBinary(sluice_binary));
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  DispatcherOptions options;
  options.host = "127.0.0.1";
  options.routine_logging = false;  // the trainer's output is the user's
  SLUICE_ASSIGN_OR_RETURN(cluster->dispatcher_, DispatcherServer::Start(options));
  const std::string dispatcher = cluster->dispatcher_address();
  // The workers run what this process can: the plugins it loaded too. They
  // log only what goes wrong: their routine lines would land in the
  // trainer's output (a notebook's cells).
  cluster->args_ = {binary,   "worker",    "--dispatcher", dispatcher,
                    "--host", "127.0.0.1", "--threads",    std::to_string(threads_per_worker),
                    "--quiet"};
  for (const std::string& plugin : ops::LoadedPlugins())
    cluster->args_.insert(cluster->args_.end(), {"--plugin", plugin});
  // The watcher forks every worker: a child's death signal follows the
  // thread that forked it, and the watcher lives as long as the cluster
  // (workers forked by the caller's thread died when it ended: a pipeline
  // made in a thread of the user's lost them, and a replacement ran).
  const int count = std::max(1, workers);
  cluster->watcher_ = std::thread([c = cluster.get(), count] { c->Watch(count); });
  {
    absl::MutexLock lock(&cluster->mu_);
    cluster->mu_.Await(absl::Condition(&cluster->started_));
    SLUICE_RETURN_IF_ERROR(cluster->start_status_);
  }
  Log("client", absl::StrCat("embedded service: dispatcher at ", dispatcher, ", ", count, " local worker process(es)"));
  return cluster;
}

absl::StatusOr<pid_t> LocalCluster::StartWorker() {
  std::vector<std::string> args = args_;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return io::ErrnoStatus(errno, "cannot start a worker process for", args_[0]);
  if (pid == 0) {
    // The child: die with the parent (at once: its only consumer is gone,
    // nothing is left to drain, and a stream stuck in the user's code would
    // hold it for the drain's 35 s), then become `sluice worker`. Its
    // announcement goes with its log to stderr: the user's stdout is the
    // training script's own.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    // A process group of its own: Ctrl-C in a terminal, or a notebook's
    // interrupt, signals the trainer's group, and must not drain (and
    // restart) the workers of every pipeline it holds.
    ::setpgid(0, 0);
    ::dup2(2, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

namespace {

// A worker that ends this soon after its start did not start: what kills it
// (a wrong command, a limit) will kill the next one too.
constexpr absl::Duration kQuickDeath = absl::Seconds(10);
constexpr int kMaxQuickDeaths = 5;
// A fork that fails (EAGAIN at a pids limit) may pass: tried once a
// second for half a minute.
constexpr int kMaxFailedStarts = 30;

}  // namespace

void LocalCluster::Watch(int workers) {
  absl::MutexLock lock(&mu_);
  places_.resize(workers);
  for (Place& place : places_) {
    absl::StatusOr<pid_t> pid = StartWorker();
    if (!pid.ok()) {
      start_status_ = pid.status();
      break;
    }
    place.pid = *pid;
    place.started = absl::Now();
  }
  started_ = true;
  if (!start_status_.ok()) return;
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(1))) {
    for (Place& place : places_) Tend(place);
    if (AllGivenUp()) return;
  }
}

void LocalCluster::Tend(Place& place) {
  if (place.pid == kGivenUp) return;
  std::string ended;  // how the place's last worker ended
  if (place.pid > 0) {
    int status = 0;
    if (::waitpid(place.pid, &status, WNOHANG) != place.pid) return;
    ended = absl::StrCat("local worker process ", place.pid, " ",
                         WIFSIGNALED(status) ? absl::StrCat("was killed by signal ", WTERMSIG(status))
                                             : absl::StrCat("exited with status ", WEXITSTATUS(status)));
    const bool quick = absl::Now() - place.started < kQuickDeath;
    if (!quick) place.quick_deaths = 0;
    if (quick && !CountFailure(place, &place.quick_deaths, kMaxQuickDeaths, ended)) return;
  }
  absl::StatusOr<pid_t> replacement = StartWorker();
  if (!replacement.ok()) {
    place.pid = kToStart;  // tried again on the next round
    const std::string failed = absl::StrCat("cannot start a local worker process: ", replacement.status().message());
    if (CountFailure(place, &place.failed_starts, kMaxFailedStarts, failed)) {
      Log("client", ended.empty() ? failed : absl::StrCat(ended, "; ", failed));
    }
    return;
  }
  place.pid = *replacement;
  place.started = absl::Now();
  place.failed_starts = 0;
  Log("client", ended.empty() ? absl::StrCat("started local worker process ", place.pid)
                              : absl::StrCat(ended, "; started ", place.pid, " in its place (its splits run again)"));
}

bool LocalCluster::CountFailure(Place& place, int* failures, int limit, const std::string& how) {
  if (++*failures < limit) return true;
  place.pid = kGivenUp;
  failure_ = absl::UnavailableError(absl::StrCat(
      "the embedded service's workers do not start: ", how, ", the ", limit, "th in a row",
      failures == &place.quick_deaths ? absl::StrCat(" within ", absl::FormatDuration(kQuickDeath), " of its start")
                                      : "",
      " (the command: ", args_[0],
      " worker; its own words, if any, are in the output above). Check that it is this version of sluice "
      "(SLUICE_BINARY, PATH) and the process limits (ulimit -u, -v)"));
  Log("client", absl::StrCat(how, "; given up: no other is started in its place"));
  return false;
}

std::vector<pid_t> LocalCluster::worker_pids() const {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> pids;
  for (const Place& place : places_) {
    if (place.pid > 0) pids.push_back(place.pid);
  }
  return pids;
}

absl::Status LocalCluster::failure() const {
  absl::MutexLock lock(&mu_);
  return AllGivenUp() ? failure_ : absl::OkStatus();
}

bool LocalCluster::AllGivenUp() const {
  return !places_.empty() &&
         std::all_of(places_.begin(), places_.end(), [](const Place& p) { return p.pid == kGivenUp; });
}

LocalCluster::~LocalCluster() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
  const std::vector<pid_t> pids = worker_pids();
  for (pid_t pid : pids) ::kill(pid, SIGTERM);
  // A worker whose stream is stuck in the user's code (Ctrl-C on a hung
  // Python op) would wait out its drain (35 s) and hold the trainer's exit:
  // its only consumer is gone, so there is nothing to drain for.
  const absl::Time deadline = absl::Now() + kStopGrace;
  for (pid_t pid : pids) {
    while (WaitChild(pid, nullptr, WNOHANG) == 0) {
      if (absl::Now() >= deadline) {
        ::kill(pid, SIGKILL);
        WaitChild(pid, nullptr, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  if (dispatcher_) dispatcher_->Stop();
}

}  // namespace sluice::service
