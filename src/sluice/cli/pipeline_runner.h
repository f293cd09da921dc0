// Iterates a pipeline epoch by epoch and measures it: what `sluice run` and
// `sluice-bench` report.
#ifndef SLUICE_CLI_PIPELINE_RUNNER_H_
#define SLUICE_CLI_PIPELINE_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/placement/placed_pipeline.h"

namespace sluice::cli {

struct RunOptions {
  int epochs = 1;
  // Keep running further epochs until this much time has passed.
  double min_seconds = 0;
  // The pipeline repeats forever (a repeat node after its source, so that
  // epochs follow one another with no pause to drain and refill): stop
  // after min_seconds, mid-epoch.
  bool endless = false;
  bool progress = true;
};

// The corrupt records an epoch skipped.
struct EpochSkips {
  int epoch = 0;
  int64_t records = 0;
  std::string summary;
};

struct RunReport {
  int epochs = 0;
  int64_t samples = 0;
  int64_t batches = 0;
  // From the first element on (excludes pipeline start and first element).
  double seconds = 0;
  double samples_per_s = 0;
  // From Iterate() to the first element of the first epoch.
  double first_batch_ms = 0;
  // Process peak RSS (VmHWM) after each epoch, bytes.
  std::vector<int64_t> peak_rss_after_epoch;
  int64_t skipped_records = 0;    // over all epochs
  std::vector<EpochSkips> skips;  // the epochs that skipped any
  int64_t peak_buffered_bytes = 0;
  // The pipeline's buffer pool at the end: its peaks are what the engine
  // held at most (in use, and in use plus cached).
  BufferPool::Stats memory;
  int64_t ring_bytes = 0;  // the service client's shared-memory rings
};

absl::StatusOr<RunReport> RunPipeline(placement::PlacedPipeline& pipeline, const RunOptions& options);

// What the run skipped, in one warning: the epoch's summary for a run of
// one epoch; each epoch's, or the one all epochs share, with the total,
// for several. Empty when nothing was skipped.
std::string SkipWarning(const RunReport& report);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_PIPELINE_RUNNER_H_
