#include "sluice/core/python_pool.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<PythonPool>> PythonPool::Start(std::string interpreter, std::string spec_json,
                                                               int processes, std::string what) {
  std::unique_ptr<PythonPool> pool(new PythonPool(std::move(interpreter), std::move(spec_json), std::move(what)));
  if (processes < 1) return pool->Named(absl::InvalidArgumentError(absl::StrCat("processes must be >= 1, got ",
                                                                                processes)));
  std::vector<std::unique_ptr<PythonProcess>> started;
  for (int i = 0; i < processes; ++i) {  // all start, then all import, side by side
    absl::StatusOr<std::unique_ptr<PythonProcess>> process = PythonProcess::Spawn(pool->interpreter_,
                                                                                  pool->spec_json_);
    if (!process.ok()) return pool->Named(process.status());
    started.push_back(std::move(*process));
  }
  for (const std::unique_ptr<PythonProcess>& process : started) SLUICE_RETURN_IF_ERROR(pool->Named(process->Ready()));
  pool->Release(std::move(started));
  return pool;
}

absl::Status PythonPool::Acquire(int64_t most, std::vector<std::unique_ptr<PythonProcess>>* out) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(+[](std::vector<std::unique_ptr<PythonProcess>>* f) { return !f->empty(); }, &free_));
  while (!free_.empty() && static_cast<int64_t>(out->size()) < most) {
    if (!free_.back()->Alive()) {
      absl::StatusOr<std::unique_ptr<PythonProcess>> fresh = PythonProcess::Spawn(interpreter_, spec_json_);
      absl::Status ready = fresh.ok() ? (*fresh)->Ready() : fresh.status();
      if (!ready.ok()) {  // the dead one stays, to be replaced next time: the pool never shrinks
        for (std::unique_ptr<PythonProcess>& p : *out) free_.push_back(std::move(p));
        out->clear();
        return Named(ready);
      }
      free_.back() = std::move(*fresh);
    }
    out->push_back(std::move(free_.back()));
    free_.pop_back();
  }
  return absl::OkStatus();
}

void PythonPool::Release(std::vector<std::unique_ptr<PythonProcess>> processes) {
  absl::MutexLock lock(&mu_);
  for (std::unique_ptr<PythonProcess>& p : processes) free_.push_back(std::move(p));
}

absl::Status PythonPool::Named(const absl::Status& status) const {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what_, ": ", status.message()));
}

nlohmann::json PythonColumnJson(const ColumnSpec& c) {
  return {{"name", c.name}, {"dtype", c.ragged ? "bytes" : std::string(DTypeName(c.dtype))},
          {"shape", std::vector<int64_t>(c.shape.dims().begin(), c.shape.dims().end())}, {"ragged", c.ragged}};
}

std::string PythonInterpreter(const std::string& attr) {
  if (!attr.empty()) return attr;
  const char* env = std::getenv("SLUICE_PYTHON");
  return env != nullptr && *env != '\0' ? env : "python3";
}

}  // namespace sluice
