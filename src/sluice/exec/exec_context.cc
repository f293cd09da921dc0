#include "sluice/exec/exec_context.h"

#include <algorithm>

namespace sluice::exec {

void Cancellation::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  absl::MutexLock lock(&mu_);
  for (auto& [mu, cv] : waits_) {
    absl::MutexLock wait_lock(mu);
    cv->SignalAll();
  }
}

void Cancellation::Register(absl::Mutex* mu, absl::CondVar* cv) {
  absl::MutexLock lock(&mu_);
  waits_.emplace_back(mu, cv);
}

void Cancellation::Unregister(absl::CondVar* cv) {
  absl::MutexLock lock(&mu_);
  waits_.erase(std::remove_if(waits_.begin(), waits_.end(), [cv](const auto& w) { return w.second == cv; }),
               waits_.end());
}

CpuBudget::CpuBudget(int tokens, Cancellation* cancel) : free_(tokens), cancel_(cancel) {
  cancel_->Register(&mu_, &cv_);
}

CpuBudget::~CpuBudget() { cancel_->Unregister(&cv_); }

bool CpuBudget::Acquire() {
  absl::MutexLock lock(&mu_);
  while (free_ == 0 && !cancel_->cancelled()) cv_.Wait(&mu_);
  if (free_ == 0) return false;
  --free_;
  return true;
}

void CpuBudget::Release() {
  absl::MutexLock lock(&mu_);
  ++free_;
  cv_.Signal();
}

MemoryBudget::MemoryBudget(int64_t limit, BufferPool* pool, Cancellation* cancel)
    : limit_(limit), pool_(pool), cancel_(cancel) {
  cancel_->Register(&mu_, &cv_);
  pool_->AddObserver(this);
}

MemoryBudget::~MemoryBudget() {
  pool_->RemoveObserver(this);
  cancel_->Unregister(&cv_);
}

bool MemoryBudget::WaitForRoom(const std::atomic<int64_t>* owed, const std::atomic<int64_t>* waiting, int64_t wanted) {
  return WaitForRoom([owed, waiting] { return owed->load() > 0 || waiting->load() == 0; }, wanted);
}

bool MemoryBudget::Full(int64_t wanted) const {
  int64_t outside = 0;
  for (const std::function<int64_t()>& bytes : outside_) outside += bytes();
  return static_cast<int64_t>(pool_->stats().live_bytes) + outside + reserved_ + wanted > limit_;
}

bool MemoryBudget::Tight(int64_t wanted) const {
  absl::MutexLock lock(&mu_);
  return Full(wanted);
}

bool MemoryBudget::WaitForRoom(const std::function<bool()>& may_wait, int64_t wanted) {
  absl::MutexLock lock(&mu_);
  while (may_wait() && !cancel_->cancelled() && Full(wanted)) cv_.Wait(&mu_);
  if (cancel_->cancelled()) return false;
  reserved_ += wanted;
  return true;
}

bool MemoryBudget::TryReserve(int64_t wanted) {
  absl::MutexLock lock(&mu_);
  if (cancel_->cancelled() || Full(wanted)) return false;
  reserved_ += wanted;
  return true;
}

void MemoryBudget::Unreserve(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  reserved_ -= bytes;
  cv_.SignalAll();
}

void MemoryBudget::Notify() {
  absl::MutexLock lock(&mu_);
  cv_.SignalAll();
}

void MemoryBudget::Add(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_ += bytes;
  peak_ = std::max(peak_, used_);
}

void MemoryBudget::Remove(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_ -= bytes;
  cv_.SignalAll();
}

int64_t MemoryBudget::peak() const {
  absl::MutexLock lock(&mu_);
  return peak_;
}

void IteratorFailure::Set(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (set_.load(std::memory_order_relaxed)) return;
  status_ = status;
  set_.store(true, std::memory_order_release);
}

absl::Status IteratorFailure::Get() const {
  if (!set_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace sluice::exec
