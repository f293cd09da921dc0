// Measures a running job for the placement policy, one window at a time:
// what the trainer took and how long it waited (timed around each Next),
// the engine's compute (its node statistics) and the process's CPU. A
// window may span epochs: an epoch's iterator folds what it measured into
// the meter and the next epoch's goes on from there.
#ifndef SLUICE_PLACEMENT_METER_H_
#define SLUICE_PLACEMENT_METER_H_

#include <cstdint>

#include "sluice/core/usable_cores.h"
#include "sluice/exec/pipeline.h"
#include "sluice/placement/policy.h"

namespace sluice::placement {

class WindowMeter {
 public:
  // A window shorter than this rates too few batches to judge a move.
  static constexpr int64_t kMinWindowNs = 2'000'000'000;
  static constexpr int kMinElements = 8;

  // Starts measuring `it` (a new epoch's iterator, or one after a move).
  void Start(const exec::PipelineIterator& it);
  void Count(int64_t rows, int64_t wait_ns) {
    rows_ += rows;
    wait_ns_ += wait_ns;
    ++elements_;
  }
  // The deterministic prefix's maps in the pipeline measured (nodes 1 to
  // `maps`), whose share of the compute and output it reports; its output
  // takes `row_bytes` a sample (0: measured out of its last map).
  void set_prefix(int maps, int64_t row_bytes) {
    prefix_maps_ = maps;
    prefix_row_bytes_ = row_bytes;
  }
  bool Due() const;
  // Adds what `it` did since Start (or the last Fold) to the window.
  void Fold(const exec::PipelineIterator& it);
  // The window, `it`'s part folded in, under `placement` of `pipeline`,
  // whose last whole epoch delivered `epoch_rows` (0: none yet); starts the
  // next one.
  Measurements Take(const exec::Pipeline& pipeline, const exec::PipelineIterator& it, const Placement& placement,
                    int64_t epoch_rows);

 private:
  void MeasurePrefix(int64_t epoch_rows, Measurements* m) const;

  // Where `it` stood when measuring it began (or was last folded).
  int64_t start_ns_ = 0, cpu_start_ns_ = 0;
  exec::PipelineStatsSnapshot stats_start_;
  // The window so far.
  int64_t ns_ = 0, cpu_ns_ = 0, rows_ = 0, wait_ns_ = 0, elements_ = 0;
  int64_t busy_ns_ = 0, front_ns_ = 0;  // the engine's compute; of it, before the batch
  int64_t front_bytes_ = 0;             // out of the node before the batch
  int64_t batch_bytes_ = 0, batches_ = 0;
  int prefix_maps_ = 0;
  int64_t prefix_row_bytes_ = 0;
  int64_t prefix_ns_ = 0, prefix_bytes_ = 0;  // the prefix's compute, and out of its last map
};

}  // namespace sluice::placement

#endif  // SLUICE_PLACEMENT_METER_H_
