// The embedded default: a dispatcher in this process and worker processes
// (`sluice worker`) on 127.0.0.1, started for a pipeline whose distribute
// node names no dispatcher, and stopped with it. A worker process that
// ends (killed, crashed) is replaced, at most once a second for each
// place: its splits run again on the others and the new one, so the job
// goes on rather than waiting for a worker that will not come back. A
// place whose workers keep dying at their start (a `sluice` that is not
// this version, a process or memory limit) is given up after a few tries;
// with every place given up the cluster has failed, and says why.
#ifndef SLUICE_SERVICE_LOCAL_CLUSTER_H_
#define SLUICE_SERVICE_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sluice/service/dispatcher_server.h"

namespace sluice::service {

class LocalCluster {
 public:
  // `sluice_binary` empty: $SLUICE_BINARY, else this executable when it is
  // `sluice`, else the `sluice` installed beside libsluice, else `sluice`
  // on PATH. The workers load the plugins this process loaded.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(int workers, int threads_per_worker,
                                                             const std::string& sluice_binary = "");
  ~LocalCluster();  // SIGTERM to the workers, then waits for them

  std::string dispatcher_address() const { return dispatcher_->local_address(); }
  // The worker processes now (a replaced one's pid changes).
  std::vector<pid_t> worker_pids() const;
  // OK while some place has a worker or will start one; else Unavailable,
  // naming the command and how its last worker ended.
  absl::Status failure() const;

 private:
  // One place for a worker process.
  struct Place {
    pid_t pid = kToStart;  // > 0: running
    absl::Time started;
    int quick_deaths = 0;   // ended within kQuickDeath of their start, in a row
    int failed_starts = 0;  // forks that failed, in a row
  };
  static constexpr pid_t kToStart = -1;
  static constexpr pid_t kGivenUp = 0;

  LocalCluster() = default;
  // Forks and execs `sluice worker` (args_).
  absl::StatusOr<pid_t> StartWorker();
  // Starts `workers`, then replaces those that end until the cluster stops.
  void Watch(int workers);
  // Reaps the place's worker if it ended, then starts one in its place
  // unless it died at its start too often.
  void Tend(Place& place) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts one more of `failures` (a place's quick deaths, or its failed
  // starts), the latest as `how`; false when that makes `limit` and the
  // place is given up.
  bool CountFailure(Place& place, int* failures, int limit, const std::string& how) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Whether every place was given up (none when none was made yet).
  bool AllGivenUp() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<DispatcherServer> dispatcher_;
  std::vector<std::string> args_;
  mutable absl::Mutex mu_;
  std::vector<Place> places_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // the first workers were started, or start_status_ says why not
  absl::Status start_status_ ABSL_GUARDED_BY(mu_);
  std::thread watcher_;
};

// The path of the `sluice` executable (see LocalCluster::Start).
absl::StatusOr<std::string> FindSluiceBinary(const std::string& preferred);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_LOCAL_CLUSTER_H_
