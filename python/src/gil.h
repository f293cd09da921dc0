// Letting go of the GIL around C++ work that may block.
#ifndef SLUICE_PYTHON_GIL_H_
#define SLUICE_PYTHON_GIL_H_

#include <Python.h>

#include <type_traits>
#include <utility>

namespace sluice::python {

// f() without the GIL, taken back by a plain call on the way out rather
// than by a destructor as py::gil_scoped_release does: Python ends a daemon
// thread that asks for the GIL once the interpreter exits (pthread_exit,
// in that call), and that unwinding out of a destructor (noexcept) was
// std::terminate: a trainer whose prefetch thread sat in next() aborted
// at exit. An exception from f takes the GIL back as it leaves.
template <typename F>
auto WithoutGil(F&& f) -> decltype(f()) {
  struct Released {
    PyThreadState* state = PyEval_SaveThread();
    ~Released() {
      if (state != nullptr) PyEval_RestoreThread(state);
    }
  } released;
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    PyEval_RestoreThread(std::exchange(released.state, nullptr));
  } else {
    auto result = f();
    PyEval_RestoreThread(std::exchange(released.state, nullptr));
    return result;
  }
}

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_GIL_H_
