// A pool of Python processes (python_process.h) running one spec: the
// `python` op's and the Python dataset source's. Processes start side by
// side; callers take some, run, and give them back. Thread-safe.
#ifndef SLUICE_CORE_PYTHON_POOL_H_
#define SLUICE_CORE_PYTHON_POOL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "sluice/core/schema.h"
#include "sluice/core/python_process.h"

namespace sluice {

class PythonPool {
 public:
  // Starts `processes` processes and waits until each is ready; errors
  // begin with `what` ("python op 'aug:blur'").
  static absl::StatusOr<std::unique_ptr<PythonPool>> Start(std::string interpreter, std::string spec_json,
                                                           int processes, std::string what);

  // Up to `most` free processes, at least one (waiting for one); a dead one
  // is replaced by a new one first.
  absl::Status Acquire(int64_t most, std::vector<std::unique_ptr<PythonProcess>>* out);
  void Release(std::vector<std::unique_ptr<PythonProcess>> processes);

  // `status` with `what` in front.
  absl::Status Named(const absl::Status& status) const;

 private:
  PythonPool(std::string interpreter, std::string spec_json, std::string what)
      : interpreter_(std::move(interpreter)), spec_json_(std::move(spec_json)), what_(std::move(what)) {}

  const std::string interpreter_, spec_json_, what_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<PythonProcess>> free_ ABSL_GUARDED_BY(mu_);
};

// A column as the processes' spec declares it (sluice/_python_worker.py).
nlohmann::json PythonColumnJson(const ColumnSpec& column);

// The interpreter to run: `attr` if set, else $SLUICE_PYTHON (the Python
// front sets it to its own), else python3 on the PATH.
std::string PythonInterpreter(const std::string& attr);

}  // namespace sluice

#endif  // SLUICE_CORE_PYTHON_POOL_H_
