// A `sluice` server started as a child process (`sluice worker`, `sluice
// dispatcher`, the bench's bare stream): it announces "... port N" on its
// first stdout line, which Start waits for.
#ifndef SLUICE_SERVICE_SERVER_PROCESS_H_
#define SLUICE_SERVICE_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::service {

class ServerProcess {
 public:
  // Runs `binary args...` and waits (at most 30 s) for its port.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const std::string& binary,
                                                              const std::vector<std::string>& args);
  ~ServerProcess();  // SIGKILL if still running, then reaps

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `signal` and reaps the process; returns its wait status.
  int Stop(int signal);

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  int stdout_ = -1;  // kept open: a closed pipe would kill the process on a print
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_SERVER_PROCESS_H_
