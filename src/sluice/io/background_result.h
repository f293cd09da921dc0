// A value computed on a detached thread of its own, for IO whose round
// trips should overlap other work (an object opened ahead of its reader,
// its ETag asked again while its last block is read).
#ifndef SLUICE_IO_BACKGROUND_RESULT_H_
#define SLUICE_IO_BACKGROUND_RESULT_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "sluice/io/thread_cancel.h"

namespace sluice::io {

template <typename T>
class BackgroundResult {
 public:
  // Starts `compute`; the thread holds the result while it runs, so dropping
  // it never waits for the IO.
  static std::shared_ptr<BackgroundResult> Start(std::function<T()> compute) {
    auto result = std::make_shared<BackgroundResult>();
    std::thread([result, compute = std::move(compute)] {
      T value = compute();
      std::lock_guard<std::mutex> lock(result->mu_);
      result->value_ = std::move(value);
      result->cv_.notify_all();
    }).detach();
    return result;
  }

  // The value once computed, for the caller to take; null when this
  // thread's pipeline is cancelled first.
  T* Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!value_.has_value()) {
      if (ThreadCancelled()) return nullptr;
      cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
    return &*value_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> value_;
};

}  // namespace sluice::io

#endif  // SLUICE_IO_BACKGROUND_RESULT_H_
