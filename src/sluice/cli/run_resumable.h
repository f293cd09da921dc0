// `sluice run --stop-after N --save-state FILE` and `--resume FILE`: one
// epoch run in parts, each in its own process, with the iterator state
// between them in a file (exec/resume.h).
#ifndef SLUICE_CLI_RUN_RESUMABLE_H_
#define SLUICE_CLI_RUN_RESUMABLE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "sluice/exec/pipeline.h"

namespace sluice::cli {

struct ResumableRun {
  std::string resume;      // state file to go on from; empty: epoch 0 from its start
  std::string save_state;  // where to write the state when the run stops; empty: nowhere
  int64_t stop_after = 0;  // elements to deliver before stopping; 0: to the epoch's end
  bool quiet = false;
  bool json = false;  // a JSON summary as the last line
};

// Runs the part and prints what it delivered (elements and samples; with
// `json`, also as a JSON line). The
// state file is written whole or not at all (a temporary file renamed).
absl::Status RunResumable(const exec::Pipeline& pipeline, const std::string& name, const ResumableRun& run);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_RUN_RESUMABLE_H_
