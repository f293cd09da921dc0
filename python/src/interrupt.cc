#include "interrupt.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "bindings.h"

namespace sluice::python {
namespace {

// The signal handler may only touch lock-free atomics and write(2); the
// watcher thread does the rest (cancelling takes locks).
int g_wake[2] = {-1, -1};
std::atomic<uint64_t> g_signals{0};
struct sigaction g_python_handler;  // chained to; set before ours is installed
unsigned long g_main_thread = 0;

absl::Mutex g_mu;
std::function<void()>* g_cancel ABSL_GUARDED_BY(g_mu) = nullptr;
uint64_t g_signals_before ABSL_GUARDED_BY(g_mu) = 0;  // g_signals when the scope began
bool g_interrupted ABSL_GUARDED_BY(g_mu) = false;

void OnSigint(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  g_signals.fetch_add(1, std::memory_order_relaxed);
  const char byte = 0;
  (void)!write(g_wake[1], &byte, 1);
  errno = saved_errno;
  if (g_python_handler.sa_flags & SA_SIGINFO) {
    g_python_handler.sa_sigaction(sig, info, context);
  } else {
    g_python_handler.sa_handler(sig);
  }
}

void WatchSignals() {
  char byte;
  while (true) {
    if (read(g_wake[0], &byte, 1) < 0 && errno != EINTR) return;
    absl::MutexLock lock(&g_mu);
    // A signal from before the current scope (read late) is not its own.
    if (g_cancel != nullptr && g_signals.load(std::memory_order_relaxed) > g_signals_before) {
      g_interrupted = true;
      (*g_cancel)();
    }
  }
}

bool StartWatcher() {
  if (pipe2(g_wake, O_CLOEXEC) != 0) return false;
  std::thread(WatchSignals).detach();  // lives as long as the process
  return true;
}

}  // namespace

void InitInterrupts() { g_main_thread = PyThread_get_thread_ident(); }

void RaiseInterrupt() {
  if (PyErr_CheckSignals() == 0) PyErr_SetNone(PyExc_KeyboardInterrupt);
  throw py::error_already_set();
}

InterruptScope::InterruptScope(std::function<void()> cancel) : cancel_(std::move(cancel)) {
  if (PyThread_get_thread_ident() != g_main_thread) return;
  static const bool watching = StartWatcher();
  if (!watching || sigaction(SIGINT, nullptr, &python_handler_) != 0) return;
  const bool has_function = (python_handler_.sa_flags & SA_SIGINFO)
                                ? python_handler_.sa_sigaction != OnSigint
                                : python_handler_.sa_handler != SIG_DFL && python_handler_.sa_handler != SIG_IGN;
  if (!has_function) return;
  {
    absl::MutexLock lock(&g_mu);
    g_cancel = &cancel_;
    g_signals_before = g_signals.load(std::memory_order_relaxed);
    g_interrupted = false;
  }
  g_python_handler = python_handler_;
  struct sigaction ours = {};
  ours.sa_sigaction = OnSigint;
  ours.sa_flags = SA_SIGINFO | (python_handler_.sa_flags & SA_RESTART);
  sigemptyset(&ours.sa_mask);
  active_ = sigaction(SIGINT, &ours, nullptr) == 0;
  if (!active_) {
    absl::MutexLock lock(&g_mu);
    g_cancel = nullptr;
  }
}

InterruptScope::~InterruptScope() {
  if (!active_) return;
  sigaction(SIGINT, &python_handler_, nullptr);
  absl::MutexLock lock(&g_mu);
  g_cancel = nullptr;
}

bool InterruptScope::interrupted() const {
  if (!active_) return false;
  absl::MutexLock lock(&g_mu);
  return g_interrupted || g_signals.load(std::memory_order_relaxed) > g_signals_before;
}

}  // namespace sluice::python
