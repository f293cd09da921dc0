// Registration of the `sluice` subcommands, one file each. A subcommand's
// callback stores its outcome in *result; main turns it into the message and
// exit code.
#ifndef SLUICE_CLI_COMMAND_H_
#define SLUICE_CLI_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "sluice/graph/thread_limit.h"

namespace sluice::cli {

// Accepts numbers > 0; kPositive's message prints a range up to
// DBL_MAX.
inline const CLI::Validator kPositive(
    [](std::string& value) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(value, v)) return "must be a number, got " + value;
      if (!(v > 0)) return "must be > 0, got " + value;
      return "";
    },
    "> 0");

// Accepts numbers >= 0; kNonNegative's message prints a range up
// to DBL_MAX.
inline const CLI::Validator kNonNegative(
    [](std::string& value) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(value, v)) return "must be a number, got " + value;
      if (!(v >= 0)) return "must be >= 0, got " + value;
      return "";
    },
    ">= 0");

// A path that must name something: an empty one (an unset shell variable)
// would resolve against the root folder.
inline const CLI::Validator kNonEmpty(
    [](std::string& value) -> std::string { return value.empty() ? "must not be empty" : ""; }, "NONEMPTY");

// A seed: any uint64. CLI11 reads "-1" into an unsigned as its wrap-around,
// and a seed must never be silently another.
inline const CLI::Validator kSeed(
    [](std::string& value) -> std::string {
      uint64_t v = 0;
      if (!value.empty() && value[0] != '-' && absl::SimpleAtoi(value, &v)) return "";
      return "must be a whole number from 0 to 18446744073709551615, got '" + value + "'";
    },
    "0..2^64-1");

// A --threads value: 0 (the pipeline's, or one per core) up to the most a
// pipeline may ask for.
inline const CLI::Validator kThreadCount(
    [](std::string& value) -> std::string {
      int v = 0;
      if (!CLI::detail::lexical_cast(value, v)) return "must be a whole number, got " + value;
      if (v >= 0 && v <= graph::kMaxThreads) return "";
      return "must be in [0, " + std::to_string(graph::kMaxThreads) + "], got " + value;
    },
    "0.." + std::to_string(graph::kMaxThreads));

void AddMakeDataCommand(CLI::App& app, absl::Status* result);
void AddRunCommand(CLI::App& app, absl::Status* result);
void AddProfileCommand(CLI::App& app, absl::Status* result);
void AddMaterializeCommand(CLI::App& app, absl::Status* result);
void AddInspectCommand(CLI::App& app, absl::Status* result);
void AddIndexCommand(CLI::App& app, absl::Status* result);
void AddOpsCommand(CLI::App& app, absl::Status* result);
void AddDispatcherCommand(CLI::App& app, absl::Status* result);
void AddWorkerCommand(CLI::App& app, absl::Status* result);
void AddStatusCommand(CLI::App& app, absl::Status* result);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_COMMAND_H_
