// The in-process engine's entry point: compile a PipelineDef once, then
// iterate it, epoch by epoch.
#ifndef SLUICE_EXEC_PIPELINE_H_
#define SLUICE_EXEC_PIPELINE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/call_once.h"
#include "absl/status/statusor.h"
#include "pipeline.pb.h"
#include "sluice/core/batch.h"
#include "sluice/exec/exec_context.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/map_merge.h"
#include "sluice/exec/position_tracker.h"
#include "sluice/exec/resume.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/io/object_block_limit.h"

namespace sluice::exec {

// One run over a pipeline. Destroying it stops the pipeline's threads.
// Thread-compatible: one consumer at a time.
class PipelineIterator {
 public:
  ~PipelineIterator();

  // The next batch (when the pipeline has a batch node) or the next sample
  // (a batch of one row). *end becomes true after the last one.
  absl::Status Next(Batch* out, bool* end);
  // Next, but an unbatched pipeline hands out the rest of its current chunk
  // at once, or as many of its rows as fit `max_bytes` (at least one): a
  // service worker sends them as one message, not a message a sample. The
  // iterator then saves no position.
  absl::Status NextRows(Batch* out, bool* end, size_t max_bytes);

  // Stops the pipeline from any thread (e.g. on Ctrl-C): a Next() blocked now
  // or called later returns Cancelled. Thread-safe.
  void Cancel() { ctx_->cancel.Cancel(); }

  // Corrupt records skipped so far (source on_corrupt "skip").
  const io::CorruptionLog& skipped() const { return ctx_->skips; }
  // High-water mark of bytes buffered between nodes.
  int64_t peak_buffered_bytes() const { return ctx_->memory.peak(); }
  // Every node's counters as of now; null when the pipeline opted out of
  // statistics. Thread-safe.
  const PipelineStats* stats() const { return ctx_->stats.get(); }
  // Records or rows its Python processes began inside elements not yet out
  // (ExecContext::progress).
  std::shared_ptr<const std::atomic<int64_t>> progress() const { return ctx_->progress; }
  // The threads its nodes compute on at once (and a map's runners, unless
  // its parallelism is set): the pipeline's, or fewer for a run of fewer
  // records (Pipeline::IterateSplits).
  int threads() const { return ctx_->threads; }
  // Records spans into `trace` from now on (null stops). REQUIRES: the
  // buffer outlives the iterator or is detached first.
  void AttachTrace(TraceBuffer* trace) { ctx_->trace.store(trace, std::memory_order_relaxed); }
  // The autotuner's current setting and what it tried; null when nothing
  // is autotuned.
  const AutotuneThread* autotune() const { return autotune_.get(); }

  // Where the epoch stands after the last element Next() returned, as
  // bytes for Pipeline::Resume (a few dozen: a position, not samples).
  // Unimplemented for pipelines that cannot resume (CheckResumable);
  // FailedPrecondition when the position is unknown.
  absl::StatusOr<std::string> SaveState() const;

 private:
  friend class Pipeline;
  PipelineIterator(std::unique_ptr<ExecContext> ctx, bool batched) : ctx_(std::move(ctx)), batched_(batched) {}

  // `max_rows_bytes` 0: one sample (or batch); else NextRows's `max_bytes`.
  absl::Status Take(Batch* out, bool* end, size_t max_rows_bytes);
  absl::Status NextElement(Batch* out, bool* end, size_t max_rows_bytes);

  std::unique_ptr<ExecContext> ctx_;
  const bool batched_;
  std::unique_ptr<AutotuneThread> autotune_;  // after ctx_: stops before it
  std::unique_ptr<Iterator> root_;            // after ctx_: destroyed first
  Batch chunk_;                               // unbatched pipelines: rows left to hand out
  int64_t next_row_ = 0;
  // Resumable pipelines: the position after the last element;
  // `position_status_` says why there is none.
  absl::Status position_status_;
  std::string fingerprint_;
  std::string listing_;  // Pipeline::Listing, saved with the state
  std::unique_ptr<ElementTracker> tracker_;
  // An epoch's end gives back what the pool no longer needs; a run of a
  // few splits (a service worker's, thousands an epoch) is not one.
  bool ends_epoch_ = true;
};

// Immutable after Create but for the autotuner's state, which carries tuning
// from one epoch's iterator to the next; Iterate may be called from several
// threads.
class Pipeline {
 public:
  // Validates and compiles `def` (see graph::Compile for the errors).
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(const PipelineDef& def);
  // The nodes `range` selects; when it starts at a distribute node, that
  // node's elements come from `remote`.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(const PipelineDef& def, const graph::CompileRange& range,
                                                          std::shared_ptr<RemoteInput> remote);

  // A pipeline from a plan compiled (and perhaps altered, as an ablation
  // does) by the caller. InvalidArgument when it starts at a remote input.
  // Ops without a kernel get theirs from the plan's registry.
  static absl::StatusOr<std::unique_ptr<Pipeline>> FromCompiled(graph::CompiledPipeline compiled);

  const graph::CompiledPipeline& compiled() const { return compiled_; }
  const Schema& output_schema() const { return compiled_.output_schema(); }
  bool batched() const { return compiled_.batched(); }

  // Runs epoch `epoch`: shuffles and random ops are keyed by it.
  // REQUIRES: the Pipeline outlives the iterator (its threads use the
  // compiled nodes).
  std::unique_ptr<PipelineIterator> Iterate(uint64_t epoch = 0) const;
  // The rest of the epoch a SaveState() state was saved in: exactly the
  // elements the saving iterator would have yielded next. InvalidArgument
  // for a state that does not match (see exec::ParseState), Unimplemented
  // when this pipeline cannot resume (CheckResumable).
  absl::StatusOr<std::unique_ptr<PipelineIterator>> Resume(const std::string& state) const;
  // Epoch `epoch` restricted to `splits` of the source, in that order.
  std::unique_ptr<PipelineIterator> IterateSplits(uint64_t epoch, std::vector<io::Split> splits) const;
  // The source's splits for one epoch, before any shuffle: listed once (a
  // service worker looks one up for every split it runs, and an image
  // folder has a split per image). Thread-safe.
  const std::vector<io::Split>& Splits() const;
  // What the source listed (ListingOf: its files and splits, counted and
  // digested), saved with a state; "" for a remote or materialized part.
  const std::string& Listing() const;

  static constexpr int64_t kUnknown = -1;
  static constexpr int64_t kInfinite = -2;
  // Elements (batches after the batch node, else samples) one epoch yields:
  // known when every source split has a known record count and no filter
  // intervenes; kUnknown otherwise, kInfinite for an endless repeat.
  // Length: the same, or the error the epoch would end in where it is
  // known before (a shard with no rows of its own); Cardinality is then
  // kUnknown.
  absl::StatusOr<int64_t> Length() const;
  int64_t Cardinality() const;

  // The memory budget in bytes, and where the pipeline's buffers come from
  // (its bytes in use, cached, and their peak: what the engine holds).
  int64_t memory_budget() const { return compiled_.memory_budget_bytes; }
  BufferPool::Stats memory() const { return pool_->stats(); }
  // Frees the blocks its pool caches for reuse (a placement it no longer
  // runs in keeps none).
  void TrimCache() const { pool_->Trim(); }
  // What the pipeline holds outside its pool: the service client's
  // shared-memory rings.
  int64_t ring_bytes() const { return remote_ ? remote_->HeldBytes() : 0; }
  // The page-locked staging buffers of its device maps, in use and cached
  // (a device runtime's pool, shared by the process's pipelines).
  int64_t staging_bytes() const;

 private:
  // `chunk_rows` and `output_pools`: ChunkRows and OutputPools of `compiled`.
  Pipeline(graph::CompiledPipeline compiled, std::shared_ptr<RemoteInput> remote, int64_t chunk_rows,
           std::vector<BufferPool*> output_pools);
  static absl::StatusOr<std::unique_ptr<Pipeline>> Make(graph::CompiledPipeline compiled,
                                                        std::shared_ptr<RemoteInput> remote);
  // nodes[0..index] for an epoch, counted when statistics are on.
  // `first_chunk_rows` > 0: the source's first chunk has that many rows
  // (IteratorArgs::first_chunk_rows), passed through nodes that keep chunks.
  std::unique_ptr<Iterator> MakeIterator(ExecContext* ctx, size_t index, uint64_t epoch,
                                         int64_t first_chunk_rows = 0) const;
  std::unique_ptr<Iterator> MakeNodeIterator(ExecContext* ctx, size_t index, uint64_t epoch,
                                             int64_t first_chunk_rows) const;
  // An iterator's context and knobs; `threads` > 0 stands for the
  // pipeline's thread count.
  std::unique_ptr<PipelineIterator> NewIterator(bool tune, int threads = 0) const;
  // The threads a run of `splits` can use: no more than their records.
  int ThreadsFor(const std::vector<io::Split>& splits) const;
  // exec::CheckResumable, and the remote input's.
  absl::Status CheckResumable() const;
  // Rows arrive as they come: options unordered, or from a service (but for
  // a shard's stream, which one worker makes in order).
  bool Unordered() const { return !compiled_.ordered || (remote_ != nullptr && !remote_->Sharding()); }
  // Makes `it` follow its position from `start` (CheckResumable passed).
  void Track(PipelineIterator* it, EpochPosition start) const;
  // The resumed shuffle's buffer, and the rows the source then reads.
  void PlanShuffleRestore(uint64_t epoch, const ShufflePosition& p, ExecContext* ctx) const;
  // The shard node's, or the sharded remote part's; nullopt without one.
  std::optional<graph::ShardSpec> Sharding() const;
  // InvalidArgument naming both when a state's sharding does not fit this
  // pipeline's.
  absl::Status CheckSharding(const EpochPosition& p) const;
  // `refused` (a state ParseState refused), saying so when the state was
  // saved with a shard node and this pipeline has none, or the reverse:
  // their fingerprints differ by it.
  absl::Status WithShardingHint(const absl::Status& refused, const std::string& state) const;
  std::vector<Knob> MakeKnobs(ExecContext* ctx) const;
  // A prefetch at `index` that a map right before it runs as its depth.
  bool FoldsIntoMap(size_t index) const;
  void ReserveWorkingSet() const;
  static int64_t ChunkRows(const graph::CompiledPipeline& compiled);
  // Per node: where its output buffers come from (null: the pipeline's pool).
  static std::vector<BufferPool*> OutputPools(const graph::CompiledPipeline& compiled);

  graph::CompiledPipeline compiled_;
  RunPlan run_;  // compiled_'s nodes as the iterators run them (map_merge.h)
  std::shared_ptr<RemoteInput> remote_;
  int64_t chunk_rows_;
  // The pipeline's buffers, bounded by the memory budget; shared by the
  // iterators of every epoch, so an epoch reuses the last one's blocks.
  std::shared_ptr<BufferPool> pool_;
  // Per node: where its output buffers come from (null: the context's pool).
  std::vector<BufferPool*> output_pools_;
  // The distinct pools among them: device runtimes' staging pools.
  std::vector<BufferPool*> staging_pools_;
  // ExecContext::split_bytes of every iterator.
  std::shared_ptr<std::atomic<int64_t>> split_bytes_ = std::make_shared<std::atomic<int64_t>>(0);
  mutable absl::once_flag splits_once_;
  mutable std::vector<io::Split> splits_;  // Splits(), once listed
  mutable absl::once_flag listing_once_;
  mutable std::string listing_;  // Listing(), once digested
  // Objects' blocks fetched ahead held to a share of the budget while it lives.
  io::ObjectBlockLimit object_block_limit_;
  // Tuning goes on across the iterators of successive epochs.
  mutable absl::Mutex autotuner_mu_;
  mutable std::shared_ptr<SharedAutotuner> autotuner_ ABSL_GUARDED_BY(autotuner_mu_);
};

// Makes and sets up the kernel of every op of `compiled` that runs one and
// has none yet, from the plan's registry (the global one when unset), for
// its node's backend. FailedPrecondition naming the node when its device
// cannot be used here; errors of a kernel's setup name the node and op.
absl::Status PrepareKernels(graph::CompiledPipeline* compiled);

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_PIPELINE_H_
