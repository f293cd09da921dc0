// A real service on 127.0.0.1 for tests: `sluice dispatcher` and `sluice
// worker` processes (the binary from $SLUICE_BIN) on ports they pick and
// print. Every process started is killed and reaped by the destructor.
#ifndef SLUICE_TESTS_SERVICE_TEST_CLUSTER_H_
#define SLUICE_TESTS_SERVICE_TEST_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::testing {

// A child process whose stdout announces "... port N".
class ServiceProcess {
 public:
  // Starts `args` (after the binary) and waits (at most 30 s) for its port.
  static absl::StatusOr<std::unique_ptr<ServiceProcess>> Start(const std::vector<std::string>& args);
  ~ServiceProcess();  // SIGKILL if still running, then reaps

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `signal` and reaps the process; returns its wait status.
  int Stop(int signal);

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int stdout_ = -1;  // kept open: a closed pipe would kill the process on a print
};

class TestCluster {
 public:
  // `flags` go to every process (e.g. --token-file F, TLS flags).
  explicit TestCluster(std::vector<std::string> flags = {}) : flags_(std::move(flags)) {}

  // `port` 0: any; `work_dir` empty: no journal.
  absl::Status StartDispatcher(const std::string& work_dir = "", int port = 0);
  absl::Status AddWorker(int threads = 1);
  ServiceProcess& dispatcher() { return *dispatcher_; }
  ServiceProcess& worker(int i) { return *workers_[i]; }
  int workers() const { return static_cast<int>(workers_.size()); }
  std::string address() const { return "127.0.0.1:" + std::to_string(dispatcher_port_); }
  // Kills the dispatcher with `signal` and starts it again on its port.
  absl::Status RestartDispatcher(int signal, const std::string& work_dir);

 private:
  std::vector<std::string> flags_;
  std::unique_ptr<ServiceProcess> dispatcher_;
  int dispatcher_port_ = 0;
  std::vector<std::unique_ptr<ServiceProcess>> workers_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SERVICE_TEST_CLUSTER_H_
