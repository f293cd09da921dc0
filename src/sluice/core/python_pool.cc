#include "sluice/core/python_pool.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"

namespace sluice {

PythonPool::PythonPool(std::string interpreter, std::string spec_json, int most, std::string what)
    : interpreter_(std::move(interpreter)),
      spec_json_(std::move(spec_json)),
      what_(std::move(what)),
      most_(most),
      free_signal_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

PythonPool::~PythonPool() {
  if (free_signal_ >= 0) close(free_signal_);
}

void PythonPool::SignalFree() {
  if (free_signal_ < 0 || signaled_ == !free_.empty()) return;
  uint64_t count = 1;
  // Neither call can block (the counter is 0 or 1) nor fail on a valid eventfd.
  const ssize_t done = signaled_ ? read(free_signal_, &count, sizeof count) : write(free_signal_, &count, sizeof count);
  if (done == sizeof count) signaled_ = !signaled_;
}

absl::StatusOr<std::unique_ptr<PythonPool>> PythonPool::Start(std::string interpreter, std::string spec_json,
                                                              int initial, int most, std::string what,
                                                              const std::atomic<bool>* cancelled) {
  std::unique_ptr<PythonPool> pool(
      new PythonPool(std::move(interpreter), std::move(spec_json), std::max(initial, most), std::move(what)));
  if (initial < 1) {
    return pool->Named(absl::InvalidArgumentError(absl::StrCat("processes must be >= 1, got ", initial)));
  }
  {
    absl::MutexLock lock(&pool->mu_);
    pool->size_ = initial;
  }
  std::vector<std::unique_ptr<PythonProcess>> started;
  SLUICE_RETURN_IF_ERROR(pool->StartInto(initial, &started, cancelled));
  absl::MutexLock lock(&pool->mu_);
  pool->free_ = std::move(started);
  pool->SignalFree();
  return pool;
}

absl::Status PythonPool::Acquire(int64_t most, std::vector<std::unique_ptr<PythonProcess>>* out) {
  std::vector<std::unique_ptr<PythonProcess>> dead;
  int replace = 0;
  {
    absl::MutexLock lock(&mu_);
    // A caller may hold several processes (a tile split among them): the
    // pool grows only when each of its processes is another caller's.
    ++waiting_;
    mu_.Await(absl::Condition(
        +[](PythonPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
          return !p->free_.empty() || p->lost_ > 0 || (p->size_ < p->most_ && p->holders_ >= p->size_);
        },
        this));
    --waiting_;
    ++holders_;
    while (!free_.empty() && static_cast<int64_t>(out->size() + dead.size()) < most) {
      std::unique_ptr<PythonProcess> process = std::move(free_.back());
      free_.pop_back();
      (process->Alive() ? *out : dead).push_back(std::move(process));
    }
    SignalFree();
    const int64_t room = most - static_cast<int64_t>(out->size() + dead.size());
    const int relost = static_cast<int>(std::min<int64_t>(lost_, room));
    lost_ -= relost;
    replace = static_cast<int>(dead.size()) + relost;
    if (out->empty() && replace == 0 && free_.empty()) {  // none free, none to replace: the pool grows
      replace = 1;
      ++size_;
    }
  }
  dead.clear();  // reaped
  std::vector<std::unique_ptr<PythonProcess>> started;
  absl::Status status = StartInto(replace, &started);
  for (std::unique_ptr<PythonProcess>& p : started) out->push_back(std::move(p));
  if (!status.ok()) {
    Release(std::move(*out));
    out->clear();
  }
  return status;
}

int PythonPool::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

absl::Status PythonPool::StartInto(int n, std::vector<std::unique_ptr<PythonProcess>>* out,
                                   const std::atomic<bool>* cancelled) {
  std::vector<std::unique_ptr<PythonProcess>> started;
  absl::Status status;
  for (int i = 0; i < n && status.ok(); ++i) {  // all start, then all import, side by side
    absl::StatusOr<std::unique_ptr<PythonProcess>> process = PythonProcess::Spawn(interpreter_, spec_json_);
    if (process.ok()) started.push_back(std::move(*process));
    status = process.status();
  }
  for (size_t i = 0; i < started.size() && status.ok(); ++i) status = started[i]->Ready(cancelled);
  if (status.ok()) {
    for (std::unique_ptr<PythonProcess>& p : started) out->push_back(std::move(p));
    return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  size_ -= n;  // a later caller tries again
  return Named(status);
}

void PythonPool::Release(std::vector<std::unique_ptr<PythonProcess>> processes) {
  absl::MutexLock lock(&mu_);
  --holders_;
  for (std::unique_ptr<PythonProcess>& p : processes) free_.push_back(std::move(p));
  SignalFree();
}

void PythonPool::TakeFree(int64_t most, std::vector<std::unique_ptr<PythonProcess>>* out) {
  std::vector<std::unique_ptr<PythonProcess>> dead;
  absl::MutexLock lock(&mu_);
  int64_t taken = 0;
  for (size_t i = free_.size(); i-- > 0 && taken < most;) {
    // A dead one leaves free_ (kept, it would hold free_signal_ readable
    // with nothing to take) for the next Acquire to replace.
    const bool alive = free_[i]->Alive();
    (alive ? *out : dead).push_back(std::move(free_[i]));
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
    if (alive) {
      ++taken;
    } else {
      ++lost_;
    }
  }
  SignalFree();
}

void PythonPool::GiveBack(std::unique_ptr<PythonProcess> process) {
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(process));
  SignalFree();
}

absl::Status PythonPool::Named(const absl::Status& status) const {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what_, ": ", status.message()));
}

nlohmann::json PythonColumnJson(const ColumnSpec& c) {
  return {{"name", c.name},
          {"dtype", c.ragged ? "bytes" : std::string(DTypeName(c.dtype))},
          {"shape", std::vector<int64_t>(c.shape.dims().begin(), c.shape.dims().end())},
          {"ragged", c.ragged}};
}

std::string PythonInterpreter(const std::string& attr) {
  if (!attr.empty()) return attr;
  const char* env = std::getenv("SLUICE_PYTHON");
  return env != nullptr && *env != '\0' ? env : "python3";
}

}  // namespace sluice
