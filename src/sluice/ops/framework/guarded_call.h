// User code the engine calls (a plugin's registration, an op's inference,
// a kernel's Setup and Run) may throw a C++ exception; one that reached an
// engine thread would end the process (std::terminate). Guarded turns it
// into an Internal error naming what threw and why.
#ifndef SLUICE_OPS_FRAMEWORK_GUARDED_CALL_H_
#define SLUICE_OPS_FRAMEWORK_GUARDED_CALL_H_

#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sluice::ops {

// f() (an absl::Status or StatusOr), or the exception it threw as an error.
template <typename F>
auto Guarded(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, " threw a C++ exception: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(what, " threw a C++ exception (not a std::exception)"));
  }
}

}  // namespace sluice::ops

#endif  // SLUICE_OPS_FRAMEWORK_GUARDED_CALL_H_
