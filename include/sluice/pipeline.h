// Running a pipeline from C++: load or build a definition, iterate its
// batches. A definition with a distribute node runs the nodes before it on
// the service's workers (its dispatcher, or an embedded one with local
// worker processes) and the rest here, exactly as `sluice run` does.
//
//   absl::StatusOr<sluice::Pipeline> pipeline = sluice::Pipeline::FromFile("pipelines/w1_mnist.json");
//   if (!pipeline.ok()) return fail(pipeline.status());
//   for (int epoch = 0; epoch < 3; ++epoch) {
//     sluice::Iterator it = pipeline->Iterate(epoch);
//     sluice::Batch batch;
//     bool end = false;
//     while (it.Next(&batch, &end).ok() && !end) train(batch.columns[0].values);
//   }
//
// A checkpoint keeps `it.SaveState()`; `pipeline->Resume(state)` goes on
// from it.
#ifndef SLUICE_PIPELINE_H_
#define SLUICE_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/core/batch.h"
#include "sluice/core/schema.h"
#include "sluice/pipeline_builder.h"

namespace sluice {

namespace placement {
class PlacedPipeline;
class PlacedIterator;
}  // namespace placement

// One epoch of a pipeline. Movable (a moved-from one's Next and SaveState
// return FailedPrecondition, its Cancel does nothing); destroying it stops
// the pipeline's threads. One consumer at a time (a Next called while
// another thread is in one returns FailedPrecondition); Cancel may come
// from any thread.
class Iterator {
 public:
  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  ~Iterator();

  // The next batch (or the next sample, a batch of one row, when the
  // pipeline has no batch node); *end becomes true after the last one.
  // Errors name what and where (file, offset, node, op); Cancelled after
  // Cancel(); InvalidArgument for a null `out` or `end`.
  absl::Status Next(Batch* out, bool* end);
  // Stops the pipeline: a Next() blocked now or called later returns
  // Cancelled.
  void Cancel();
  // Corrupt records skipped so far (a source with on_corrupt "skip"), and
  // what and where they were.
  int64_t skipped() const;
  std::string skip_summary() const;
  // Where the epoch stands after the last element Next() returned, for a
  // checkpoint: a few dozen bytes that name no file and hold no secret
  // (docs/checkpoint.md). Unimplemented, naming the node, for a pipeline
  // whose position cannot be saved.
  absl::StatusOr<std::string> SaveState() const;

 private:
  friend class Pipeline;
  explicit Iterator(std::unique_ptr<placement::PlacedIterator> it);
  std::unique_ptr<placement::PlacedIterator> it_;
};

// A compiled pipeline. Copies share it; Iterate may be called from several
// threads.
class Pipeline {
 public:
  // From a JSON definition (what `sluice run` reads and the Python builder
  // writes), given as text or as a file. InvalidArgument naming the node,
  // op and attr for a bad definition; NotFound for a missing file.
  static absl::StatusOr<Pipeline> FromJson(const std::string& json);
  static absl::StatusOr<Pipeline> FromFile(const std::string& path);
  static absl::StatusOr<Pipeline> FromBuilder(const PipelineBuilder& builder);

  // Per-sample names, dtypes and shapes of what it yields.
  const Schema& output_schema() const;
  // Whether it yields batches (it has a batch node).
  bool batched() const;
  // Elements (batches, or samples) per epoch: known when every split of
  // the source is sized and no filter intervenes.
  static constexpr int64_t kUnknown = -1;
  static constexpr int64_t kInfinite = -2;
  int64_t Cardinality() const;

  // Epoch `epoch`: shuffles and random ops are keyed by it (same seed and
  // epoch, same batches).
  Iterator Iterate(uint64_t epoch = 0) const;
  // The rest of the epoch a saved state (Iterator::SaveState) stood in:
  // exactly the elements the saving iterator had not yet returned, with
  // the same random draws, at any thread count. InvalidArgument for a
  // state of another pipeline, another listing of its files or another
  // sharding, naming both.
  absl::StatusOr<Iterator> Resume(const std::string& state) const;

  // Where it runs, and under options placement "auto" what was decided
  // and why, with the measurements behind each decision (JSON; see
  // docs/placement.md).
  std::string PlacementReport() const;

 private:
  static absl::StatusOr<Pipeline> FromDef(const PipelineDef& def);
  explicit Pipeline(std::shared_ptr<placement::PlacedPipeline> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<placement::PlacedPipeline> impl_;
};

// Serves Prometheus metrics of this process's pipelines (what each
// delivered, its consumer's wait, the engine's bytes by kind, its
// placement and decisions) on http://HOST:PORT/metrics from now on;
// returns the port (`port` 0: any free one). One endpoint per process:
// serving again returns it, or FailedPrecondition for another port.
// docs/placement.md, "Metrics", lists every name.
absl::StatusOr<int> ServeMetrics(const std::string& host = "127.0.0.1", int port = 0);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_H_
