// Autotune: chooses the parallelism of each map node and the depth of each
// prefetch (and of the ready queue a map keeps when a prefetch folds into
// it) from what the running pipeline measures, within the pipeline's CPU
// budget (its thread count) and RAM budget (its memory budget).
//
// Like tf.data's AUTOTUNE it climbs a hill: it starts from the heuristic
// setting (every map as parallel as the thread count, the written or
// default depths), tries one change at a time in the order a model of the
// pipeline suggests (raise the knob under the most pressure: a busy map
// while cores are free, a prefetch whose consumer waits on a bursty
// producer; lower the one with the most slack: maps oversubscribing busy
// cores, a queue the consumer never waits on), keeps a change only when the measured output rate rises by a
// margin, and otherwise puts it back and does not try it again from that
// setting. The controller is a pure state machine fed one interval of
// measurements at a time (tested step by step with synthetic intervals);
// AutotuneThread feeds it from a running pipeline's statistics.
#ifndef SLUICE_EXEC_AUTOTUNE_H_
#define SLUICE_EXEC_AUTOTUNE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "sluice/exec/node_stats.h"

namespace sluice::exec {

// A running node's settings that the autotuner may change. The node reads
// them as it goes; it never needs to be told. Thread-safe.
struct NodeKnobs {
  std::atomic<int> parallelism{0};  // maps: runner threads taking work
  std::atomic<int64_t> depth{0};    // prefetch: queue depth; maps: extra ready elements
};

struct Knob {
  enum class Kind { kParallelism, kDepth };
  Kind kind = Kind::kParallelism;
  int node = 0;  // index in the pipeline
  std::string node_name;
  int64_t value = 0, min = 0, max = 0;
  // RAM one more unit holds (an element in flight or buffered).
  int64_t bytes_per_unit = 0;
};

// One measurement interval.
struct Interval {
  double rate = 0;  // output rows per second
  // Per knob, in the controller's knob order: > 0 asks for more of it (a
  // map's runners busy, a prefetch's consumer waiting), < 0 says it idles
  // (runners blocked on room downstream, a queue never drained).
  std::vector<double> pressure;
};

class Autotuner {
 public:
  struct Options {
    int64_t ram_budget_bytes = int64_t{1} << 30;
    int settle_intervals = 1;  // ignored after each change
    // Averaged to rate a setting: long enough that whole batches counted in
    // an interval do not quantize the rate by more than a few percent.
    int measure_intervals = 4;
    double min_gain = 0.03;  // a change must beat the setting it left by this
  };

  Autotuner(std::vector<Knob> knobs, Options options);

  // Feeds one interval; returns the setting to run from now on (a value
  // per knob). Not thread-safe: one caller.
  const std::vector<Knob>& Step(const Interval& interval);

  const std::vector<Knob>& knobs() const { return knobs_; }
  bool converged() const { return phase_ == Phase::kConverged; }
  // One line per change tried: what, the rates, kept or put back.
  const std::vector<std::string>& log() const { return log_; }

 private:
  enum class Phase { kMeasureBase, kSettle, kMeasureTrial, kConverged };
  struct Move {
    size_t knob;
    int delta;
  };

  // The next untried move from the current setting, most promising first;
  // false when none is left.
  bool NextMove(const std::vector<double>& pressure, Move* move) const;
  bool Fits(const Move& move) const;
  // What the setting's knobs hold, with `move` made.
  int64_t Bytes(const Move& move = Move{0, 0}) const;
  // Lowers the depths of a setting that would hold more than the RAM
  // budget (logged).
  void FitToBudget();
  std::string Key() const;  // the current setting, for the tried-moves table
  std::string Describe(const Move& move) const;

  std::vector<Knob> knobs_;
  const Options options_;
  Phase phase_ = Phase::kSettle;  // the first interval includes start-up
  int intervals_in_phase_ = 0;
  double rate_sum_ = 0;
  std::vector<double> pressure_sum_;
  double base_rate_ = 0;  // of the setting being improved
  double best_rate_ = 0;  // of any setting kept
  std::vector<double> base_pressure_;
  Move trial_{0, 0};
  std::set<std::string> tried_;  // Key() + move
  std::vector<std::string> log_;
};

// An Autotuner that outlives a pipeline's iterators, so that tuning goes
// on from epoch to epoch; one iterator at a time uses it.
struct SharedAutotuner {
  explicit SharedAutotuner(Autotuner t) : tuner(std::move(t)) {}
  absl::Mutex mu;
  Autotuner tuner ABSL_GUARDED_BY(mu);
  std::atomic<bool> in_use{false};
};

// Feeds a SharedAutotuner from a running pipeline every `interval` and
// applies its setting to the nodes' knobs, until destroyed.
class AutotuneThread {
 public:
  // REQUIRES: `shared` is not in use; this thread holds it until destroyed.
  AutotuneThread(const PipelineStats* stats, std::vector<NodeKnobs*> knobs, std::shared_ptr<SharedAutotuner> shared,
                 int64_t interval_ns);
  ~AutotuneThread();

  // The tuner's current setting and log. Thread-safe.
  std::vector<Knob> knobs() const;
  std::vector<std::string> log() const;

 private:
  void Run();
  void Apply(const std::vector<Knob>& setting);
  Interval Measure(const PipelineStatsSnapshot& before, const PipelineStatsSnapshot& now) const;

  const PipelineStats* stats_;
  std::vector<NodeKnobs*> node_knobs_;  // by knob, parallel to the tuner's
  const std::shared_ptr<SharedAutotuner> shared_;
  const int64_t interval_ns_;
  absl::Notification stop_;
  std::thread thread_;  // last
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_AUTOTUNE_H_
