// A pool of Python processes (python_process.h) running one spec: the
// `python` op's and the Python dataset source's. Processes start side by
// side; callers take some, run, and give them back. Thread-safe.
#ifndef SLUICE_CORE_PYTHON_POOL_H_
#define SLUICE_CORE_PYTHON_POOL_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "sluice/core/python_process.h"
#include "sluice/core/schema.h"

namespace sluice {

// The most processes one pool may be asked for: past it, a typo (10**6)
// would start processes until the machine gives out.
inline constexpr int kMostPythonProcesses = 256;

class PythonPool {
 public:
  // Starts `initial` processes and waits until each is ready, or until
  // `*cancelled` (may be null); the pool grows on demand to `most`. Errors
  // begin with `what` ("python op 'aug:blur'").
  static absl::StatusOr<std::unique_ptr<PythonPool>> Start(std::string interpreter, std::string spec_json, int initial,
                                                           int most, std::string what,
                                                           const std::atomic<bool>* cancelled = nullptr);

  // Up to `most` free processes, at least one. A caller finding none free,
  // each process held by another caller, starts one while the pool is
  // under its size, else waits: the pool grows to as many processes as
  // callers run at once (a map's runners, which the autotuner sets). Dead
  // processes are replaced. Processes start outside the lock: other
  // callers go on meanwhile.
  absl::Status Acquire(int64_t most, std::vector<std::unique_ptr<PythonProcess>>* out);
  // Gives back what one successful Acquire took (a failed one took nothing).
  void Release(std::vector<std::unique_ptr<PythonProcess>> processes);

  // Between its Acquire and Release, a caller may take free live processes
  // (up to `most`, without waiting) and give back ones it is done with, so
  // that no process idles while some caller has rows to run.
  void TakeFree(int64_t most, std::vector<std::unique_ptr<PythonProcess>>* out);
  // Callers in Acquire that have not been served yet (waiting, or about to).
  int waiting() const;
  void GiveBack(std::unique_ptr<PythonProcess> process);
  // A descriptor readable while a process is free, for a caller with rows
  // left to wait on beside its own processes (PythonProcess::WaitAny): a
  // process another caller gave back is taken at once, not once one of its
  // own answers (which may be stuck in the user's code for long).
  int free_signal() const { return free_signal_; }

  ~PythonPool();
  PythonPool(const PythonPool&) = delete;
  PythonPool& operator=(const PythonPool&) = delete;

  // `status` with `what` in front.
  absl::Status Named(const absl::Status& status) const;

 private:
  PythonPool(std::string interpreter, std::string spec_json, int most, std::string what);

  // Makes free_signal_ readable exactly while free_ holds a process.
  void SignalFree() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Starts `n` processes (their slots counted in size_) into `out`; on an
  // error none is kept and the n slots are given up.
  absl::Status StartInto(int n, std::vector<std::unique_ptr<PythonProcess>>* out,
                         const std::atomic<bool>* cancelled = nullptr);

  const std::string interpreter_, spec_json_, what_;
  const int most_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<PythonProcess>> free_ ABSL_GUARDED_BY(mu_);
  int size_ ABSL_GUARDED_BY(mu_) = 0;     // processes running or starting
  int holders_ ABSL_GUARDED_BY(mu_) = 0;  // callers between Acquire and Release
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;  // callers in Acquire, not yet served
  int lost_ ABSL_GUARDED_BY(mu_) = 0;     // died while free: Acquire starts them again
  const int free_signal_;                 // an eventfd
  bool signaled_ ABSL_GUARDED_BY(mu_) = false;
};

// A column as the processes' spec declares it (sluice/_python_worker.py).
nlohmann::json PythonColumnJson(const ColumnSpec& column);

// The interpreter to run: `attr` if set, else $SLUICE_PYTHON (the Python
// front sets it to its own), else python3 on the PATH.
std::string PythonInterpreter(const std::string& attr);

}  // namespace sluice

#endif  // SLUICE_CORE_PYTHON_POOL_H_
