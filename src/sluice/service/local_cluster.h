// The embedded default: a dispatcher in this process and worker processes
// (`sluice worker`) on 127.0.0.1, started for a pipeline whose distribute
// node names no dispatcher, and stopped with it.
#ifndef SLUICE_SERVICE_LOCAL_CLUSTER_H_
#define SLUICE_SERVICE_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
  const std::vector<pid_t>& worker_pids() const { return pids_; }

 private:
  LocalCluster() = default;
  std::unique_ptr<DispatcherServer> dispatcher_;
  std::vector<pid_t> pids_;
};

// The path of the `sluice` executable (see LocalCluster::Start).
absl::StatusOr<std::string> FindSluiceBinary(const std::string& preferred);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_LOCAL_CLUSTER_H_
