// One line per event on stderr, "2026-11-23 04:10:00.123 dispatcher: ...",
// so the processes' logs read well side by side.
#ifndef SLUICE_SERVICE_LOG_H_
#define SLUICE_SERVICE_LOG_H_

#include "absl/strings/string_view.h"

namespace sluice::service {

// What goes wrong, or needs the operator's eye: always logged.
void Log(absl::string_view who, absl::string_view message);
// Routine events (listening, joins, a journal replayed): logged unless
// routine logging is off (`--quiet`, a pool that its trainer starts).
void LogRoutine(absl::string_view who, absl::string_view message);
void SetRoutineLogging(bool on);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_LOG_H_
