// Ctrl-C while the main thread waits in C++ with the GIL released. Python's
// own SIGINT handler only flags the signal for the interpreter, which cannot
// act until the wait ends, so a pipeline that is slow to yield would make
// Ctrl-C seem dead. While an InterruptScope lives, a handler chained in front
// of Python's also cancels the pipeline (or the pipeline's making: a
// listing that retries a store); the wait returns at once and Python
// raises KeyboardInterrupt as usual.
#ifndef SLUICE_PYTHON_INTERRUPT_H_
#define SLUICE_PYTHON_INTERRUPT_H_

#include <signal.h>

#include <cstdint>
#include <functional>

namespace sluice::python {

class InterruptScope {
 public:
  // Calls `cancel` on SIGINT (from a thread of its own: it may take
  // locks). Inactive off the main thread (Python handles signals there
  // only) and when SIGINT is ignored or left to the default action.
  // REQUIRES: the GIL is held.
  explicit InterruptScope(std::function<void()> cancel);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // Whether SIGINT arrived while this scope was active.
  bool interrupted() const;

 private:
  std::function<void()> cancel_;
  bool active_ = false;
  struct sigaction python_handler_;
};

// Records the main thread; called once at import.
void InitInterrupts();

// Runs the Python SIGINT handler now (KeyboardInterrupt by default); what
// was waited on is cancelled either way, so a handler that does not raise
// gets KeyboardInterrupt too. REQUIRES: the GIL is held.
[[noreturn]] void RaiseInterrupt();

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_INTERRUPT_H_
