// `sluice profile`: runs a pipeline several ways and says where its
// bottleneck is. The runs: the whole pipeline (with statistics, and a trace
// when asked); the source alone; each op stood in for by an identity
// (ablation); and, given the trainer's rate, the pipeline consumed at that
// rate. From them: each op's cost, what bounds the job, and the levers.
#ifndef SLUICE_PROFILE_PROFILER_H_
#define SLUICE_PROFILE_PROFILER_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline.pb.h"
#include "sluice/profile/analyzer.h"
#include "sluice/profile/run_measurement.h"

namespace sluice::profile {

struct ProfileOptions {
  double seconds = 3;                 // the whole pipeline
  double short_seconds = 1;           // the source alone, each ablation, the paced run
  double consumer_samples_per_s = 0;  // the trainer's rate; 0: unknown
  double target_samples_per_s = 0;    // 0: the trainer's rate
  bool ablation = true;
  bool trace = false;  // record spans during the whole-pipeline run
  // Set (Ctrl-C in Python): the profile stops at the next element, Cancelled.
  const std::atomic<bool>* cancelled = nullptr;
};

struct ProfileResult {
  Findings findings;
  Verdict verdict;
  RunMeasurement full;                 // the whole pipeline
  std::vector<exec::TraceSpan> spans;  // when traced
  int64_t dropped_spans = 0;
  std::string note;  // e.g. that a distribute node was profiled in-process
};

// Progress lines ("ablating gaussian_blur (2/4)") go to `progress`.
absl::StatusOr<ProfileResult> RunProfile(const PipelineDef& def, const ProfileOptions& options,
                                         const std::function<void(const std::string&)>& progress);

}  // namespace sluice::profile

#endif  // SLUICE_PROFILE_PROFILER_H_
