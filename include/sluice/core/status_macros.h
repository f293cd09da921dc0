// Status propagation helpers. abseil ships none, and unprefixed names collide
// with other libraries' macros.
#ifndef SLUICE_CORE_STATUS_MACROS_H_
#define SLUICE_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#define SLUICE_CONCAT_INNER_(a, b) a##b
#define SLUICE_CONCAT_(a, b) SLUICE_CONCAT_INNER_(a, b)

#define SLUICE_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status sluice_status_ = (expr);          \
    if (!sluice_status_.ok()) return sluice_status_; \
  } while (0)

#define SLUICE_ASSIGN_OR_RETURN(lhs, expr) \
  SLUICE_ASSIGN_OR_RETURN_IMPL_(SLUICE_CONCAT_(sluice_or_, __LINE__), lhs, expr)

#define SLUICE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

namespace sluice {

// Returns `status` with "context: " prefixed to its message and the same code;
// OK stays OK. Used at each layer boundary so errors say where they happened.
absl::Status WithContext(const absl::Status& status, absl::string_view context);

}  // namespace sluice

#endif  // SLUICE_CORE_STATUS_MACROS_H_
