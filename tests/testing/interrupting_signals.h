// Signals sent to one thread all along, each interrupting its system calls.
#ifndef SLUICE_TESTING_INTERRUPTING_SIGNALS_H_
#define SLUICE_TESTING_INTERRUPTING_SIGNALS_H_

#include <pthread.h>

#include <atomic>
#include <thread>

namespace sluice::testing {

// From construction to destruction, SIGUSR1 every half millisecond to the
// thread that constructed it, through a handler installed without
// SA_RESTART: as a trainer's Python handlers (PyTorch's DataLoader installs
// one for SIGCHLD), each makes a blocked system call fail with EINTR.
class InterruptingSignals {
 public:
  InterruptingSignals();
  ~InterruptingSignals();
  InterruptingSignals(const InterruptingSignals&) = delete;
  InterruptingSignals& operator=(const InterruptingSignals&) = delete;

  // How many were sent so far.
  int sent() const { return sent_.load(); }

 private:
  const pthread_t target_;
  std::atomic<bool> stop_{false};
  std::atomic<int> sent_{0};
  std::thread sender_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTING_INTERRUPTING_SIGNALS_H_
