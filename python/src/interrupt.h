// Ctrl-C while the main thread waits in C++ with the GIL released. Python's
// own SIGINT handler only flags the signal for the interpreter, which cannot
// act until the wait ends, so a pipeline that is slow to yield would make
// Ctrl-C seem dead. While an InterruptScope lives, a handler chained in front
// of Python's also cancels the pipeline; the wait returns at once and Python
// raises KeyboardInterrupt as usual.
#ifndef SLUICE_PYTHON_INTERRUPT_H_
#define SLUICE_PYTHON_INTERRUPT_H_

#include <signal.h>

#include <cstdint>

#include "sluice/placement/placed_pipeline.h"

namespace sluice::python {

class InterruptScope {
 public:
  // Cancels `it` on SIGINT. Inactive off the main thread (Python handles
  // signals there only) and when SIGINT is ignored or left to the default
  // action. REQUIRES: the GIL is held.
  explicit InterruptScope(placement::PlacedIterator* it);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // Whether SIGINT arrived while this scope was active.
  bool interrupted() const;

 private:
  bool active_ = false;
  struct sigaction python_handler_;
};

// Records the main thread; called once at import.
void InitInterrupts();

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_INTERRUPT_H_
