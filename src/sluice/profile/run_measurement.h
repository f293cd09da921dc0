// Runs a pipeline for a while and measures it: output rate, CPU, the
// per-node statistics, and how the rate and the buffers moved over time.
// The profiler's building block (full run, input-only run, each ablation,
// the run paced like the trainer).
#ifndef SLUICE_PROFILE_RUN_MEASUREMENT_H_
#define SLUICE_PROFILE_RUN_MEASUREMENT_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/exec/pipeline.h"
#include "sluice/exec/trace_buffer.h"

namespace sluice::profile {

struct MeasureOptions {
  // Epochs are repeated until this much has passed, and (unpaced) until no
  // wait for an element was more than an eighth of the time: a bursty
  // pipeline is timed over several bursts, up to 8 times this.
  double min_seconds = 3;
  // > 0: the consumer is a trainer of this speed: after each element it
  // spends rows / rate seconds (sleeping) before asking for the next.
  double consumer_samples_per_s = 0;
  // Attached to every epoch's iterator when set.
  exec::TraceBuffer* trace = nullptr;
  double sample_interval_s = 0.1;  // of the time series
  // Set: the run stops at the next element, Cancelled (ProfileOptions).
  const std::atomic<bool>* cancelled = nullptr;
};

// A counter over time, for the trace and the report.
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (seconds since start, value)
};

struct RunMeasurement {
  int64_t samples = 0;
  double seconds = 0;        // from the first element on
  double samples_per_s = 0;  // over `seconds`
  double cpu_seconds = 0;    // this process's, over `seconds`
  double first_element_ms = 0;
  double consumer_wait_share = 0;  // of the timed part, spent blocked in next()
  // Totals over the timed part, per node.
  std::vector<exec::NodeStatsSnapshot> nodes;
  // "samples/s", "consumer wait", and "<node> buffered" per node.
  std::vector<Series> series;
  int64_t start_ns = 0;           // NowNs() at the first element: the trace's zero
  std::vector<exec::Knob> tuned;  // the autotuner's setting at the end
  std::vector<std::string> tune_log;
  std::vector<std::pair<int, std::string>> thread_names;  // kernel id, name
  // The pipeline's buffer pool at the end, and its budget (docs/memory.md).
  BufferPool::Stats memory;
  int64_t memory_budget = 0;
};

absl::StatusOr<RunMeasurement> MeasureRun(const exec::Pipeline& pipeline, const MeasureOptions& options);

}  // namespace sluice::profile

#endif  // SLUICE_PROFILE_RUN_MEASUREMENT_H_
