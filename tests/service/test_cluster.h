// A real service on 127.0.0.1 for tests: `sluice dispatcher` and `sluice
// worker` processes (the binary from $SLUICE_BIN) on ports they pick and
// print. Every process started is killed and reaped by the destructor.
#ifndef SLUICE_TESTS_SERVICE_TEST_CLUSTER_H_
#define SLUICE_TESTS_SERVICE_TEST_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service.pb.h"
#include "sluice/service/server_process.h"

namespace sluice::testing {

using ServiceProcess = service::ServerProcess;

class TestCluster {
 public:
  // `flags` go to every process (e.g. --token-file F, TLS flags).
  explicit TestCluster(std::vector<std::string> flags = {}) : flags_(std::move(flags)) {}

  // `port` 0: any; `work_dir` empty: no journal; `flags`: for the
  // dispatcher alone.
  absl::Status StartDispatcher(const std::string& work_dir = "", int port = 0,
                               const std::vector<std::string>& flags = {});
  // `flags`: for this worker alone (e.g. --plugin PATH).
  absl::Status AddWorker(int threads = 1, const std::vector<std::string>& flags = {});
  ServiceProcess& dispatcher() { return *dispatcher_; }
  ServiceProcess& worker(int i) { return *workers_[i]; }
  int workers() const { return static_cast<int>(workers_.size()); }
  std::string address() const { return "127.0.0.1:" + std::to_string(dispatcher_port_); }
  // Kills the dispatcher with `signal` and, after `outage`, starts it
  // again on its port.
  absl::Status RestartDispatcher(int signal, const std::string& work_dir, absl::Duration outage = absl::ZeroDuration());

 private:
  std::vector<std::string> flags_;
  std::unique_ptr<ServiceProcess> dispatcher_;
  int dispatcher_port_ = 0;
  std::vector<std::unique_ptr<ServiceProcess>> workers_;
};

// A worker process's GetStatus (expects it to answer).
WorkerStatus StatusOf(const ServiceProcess& worker);

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SERVICE_TEST_CLUSTER_H_
