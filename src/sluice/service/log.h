// One line per event on stderr, "2026-11-23 04:10:00.123 dispatcher: ...",
// so the processes' logs read well side by side.
#ifndef SLUICE_SERVICE_LOG_H_
#define SLUICE_SERVICE_LOG_H_

#include "absl/strings/string_view.h"

namespace sluice::service {

void Log(absl::string_view who, absl::string_view message);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_LOG_H_
