// A pipeline that runs where its placement puts it. As written ("manual"),
// one compiled pipeline runs every epoch. Under `placement: "auto"` it
// measures each window of the running job, asks the Policy where to run
// next, and moves there: mid-epoch through the iterator's state when the
// state moves between the two placements exactly (a thread count always;
// worker processes when rows arrive unordered), else at the epoch's end.
// Every sample is delivered once, with the draws keyed by its identity.
#ifndef SLUICE_PLACEMENT_PLACED_PIPELINE_H_
#define SLUICE_PLACEMENT_PLACED_PIPELINE_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "pipeline.pb.h"
#include "sluice/exec/pipeline.h"
#include "sluice/io/array_source.h"
#include "sluice/placement/kept_prefix.h"
#include "sluice/placement/meter.h"
#include "sluice/placement/policy.h"

namespace sluice::placement {

class PlacedIterator;

// What was decided and why: the placement now, every decision with its
// numbers, the last window's measurements and the alternatives' predicted
// rates. Under "manual" only the placement.
struct Report {
  int64_t pipeline = 0;  // its number in the process (the metrics' label)
  bool automatic = false;
  Placement placement;  // the policy's choice
  // Where it runs now: the choice, or the placement before it while a
  // move waits for the epoch's end.
  Placement running;
  bool judging = false;  // a move is being tried
  Levers levers;
  std::vector<std::string> decisions;
  // The deterministic prefix kept: being written, what was written, or why
  // it could not be; empty until a move asks for it.
  std::string kept_prefix;
  Measurements last;  // seconds == 0: none yet
  std::vector<Candidate> alternatives;
  std::string ToJson() const;
  // A few lines for `sluice run`.
  std::string ToText() const;
};

class PlacedPipeline : public std::enable_shared_from_this<PlacedPipeline> {
 public:
  // InvalidArgument for a bad definition (graph::Compile's errors) or
  // placement option.
  static absl::StatusOr<std::shared_ptr<PlacedPipeline>> Create(const PipelineDef& def);

  // REQUIRES: the PlacedPipeline is held by a shared_ptr (Create's).
  std::unique_ptr<PlacedIterator> Iterate(uint64_t epoch);
  absl::StatusOr<std::unique_ptr<PlacedIterator>> Resume(const std::string& state);

  // The compiled pipeline of the current placement (its schema, memory,
  // statistics).
  std::shared_ptr<const exec::Pipeline> current() const;
  // The placement it started in, compiled: the same schema, length and
  // fingerprint as every other. Lives as long as this.
  const exec::Pipeline& first() const { return *first_; }
  Report report() const;
  // What its compiled placements hold: their pools summed, their rings,
  // and the process's staging buffers.
  struct Holdings {
    BufferPool::Stats pool;
    int64_t rings = 0;
    int64_t staging = 0;
  };
  Holdings held() const;
  // The engine's host bytes by kind, as pipe.memory() and the metrics say
  // them: its pools, rings and staging, and beside them the process's
  // objects' blocks, the python op's shared memory and mapped files.
  struct Memory {
    int64_t budget = 0;
    std::string budget_default;  // how the machine sized it; empty when set
    int64_t in_use = 0, cached = 0, rings = 0, staging = 0;
    int64_t object_blocks = 0, python_shared = 0, mapped_files = 0, columnar = 0, arrays = 0;
    int64_t held = 0;  // all of the above
    int64_t peak_in_use = 0, peak_held = 0;
  };
  Memory memory() const;
  // What its iterators delivered since metrics were served (counted only
  // then, or under "auto"): rows, elements and the consumer's wait in Next.
  struct Deliveries {
    int64_t samples = 0, elements = 0, wait_ns = 0;
  };
  Deliveries delivered() const;
  // Its number among the process's pipelines (the metrics' `pipeline`).
  int64_t number() const { return number_; }
  bool automatic() const { return automatic_; }
  // Writes the deterministic prefix now, if not yet, and waits for it (a
  // test seam: under "auto" a move to keep it starts it in the background).
  absl::Status KeepPrefixNow();

 private:
  friend class PlacedIterator;
  PlacedPipeline(PipelineDef def, bool automatic, Placement start, Levers levers, int prefix_maps,
                 std::shared_ptr<const exec::Pipeline> first);

  // The compiled variant at `p`, now the current one. A variant that
  // cannot start is refused (the policy goes back) and its error returned.
  absl::StatusOr<std::shared_ptr<const exec::Pipeline>> VariantAt(const Placement& p);
  std::shared_ptr<const exec::Pipeline> MakeCurrent(const Placement& p, std::shared_ptr<const exec::Pipeline> pipeline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A window's measurements in; the placement to run now out.
  Placement Observe(const Measurements& m);
  void LoseService(const absl::Status& error);
  // `p` as it can run now: without the kept prefix while it is written
  // (started here) or when it could not be (the policy goes back).
  Placement Runnable(Placement p);
  // The deterministic prefix's maps for the meter, when the prefix may be
  // kept and is not kept at `placement`.
  int PrefixMaps(const Placement& placement) const;
  // KeptPrefix::row_bytes, 0 without one.
  int64_t PrefixRowBytes() const;
  // Frees what the pools of placements not running now cache (an
  // iterator that ran there has since returned its blocks).
  void TrimIdle();
  void TrimIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An iterator ends: the window it measured goes on in the next epoch's,
  // when that runs in the same placement.
  void Bank(const WindowMeter& meter, const Placement& placement);
  WindowMeter Carried(const Placement& placement);
  // Whether an epoch under `from` can go on under `to` through its state.
  bool MovesMidEpoch(const Placement& from, const Placement& to) const;
  void CountDelivery(int64_t rows, int64_t wait_ns);
  // A whole epoch delivered `rows` (under "auto"): what keeping the prefix
  // would write is measured by it.
  void EpochDelivered(int64_t rows) { epoch_rows_.store(rows, std::memory_order_relaxed); }

  const PipelineDef def_;
  const io::CountedArrayBytes def_arrays_;  // its arrays source's rows, in memory()'s "arrays"
  const bool automatic_;
  const std::shared_ptr<const exec::Pipeline> first_;
  // Null unless the prefix may be kept; destroyed after the variants that
  // read it.
  const std::unique_ptr<KeptPrefix> kept_;
  mutable absl::Mutex mu_;
  Policy policy_ ABSL_GUARDED_BY(mu_);
  // Compiled placements: the first and the current one.
  std::vector<std::pair<Placement, std::shared_ptr<const exec::Pipeline>>> variants_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const exec::Pipeline> current_ ABSL_GUARDED_BY(mu_);
  Placement current_placement_ ABSL_GUARDED_BY(mu_);
  Measurements last_ ABSL_GUARDED_BY(mu_);
  std::vector<Candidate> alternatives_ ABSL_GUARDED_BY(mu_);
  bool prefix_noted_ ABSL_GUARDED_BY(mu_) = false;  // its summary in the policy's log
  WindowMeter carried_ ABSL_GUARDED_BY(mu_);
  Placement carried_placement_ ABSL_GUARDED_BY(mu_);
  int64_t number_ = 0;
  std::atomic<int64_t> samples_{0}, elements_{0}, wait_ns_{0};
  std::atomic<int64_t> epoch_rows_{0};  // the last whole epoch's
  // Memory::peak_held so far: the pool's peak with what is beside it now
  // falls when what was beside it goes.
  mutable std::atomic<int64_t> peak_held_{0};
};

// One epoch of a PlacedPipeline, in whichever placement it runs. One
// consumer at a time; Cancel may come from any thread or a signal handler.
class PlacedIterator {
 public:
  ~PlacedIterator();

  absl::Status Next(Batch* out, bool* end);
  void Cancel();
  absl::StatusOr<std::string> SaveState() const { return inner_->SaveState(); }
  // Corrupt records skipped so far, in every placement the epoch ran in.
  int64_t skipped() const;
  std::string skip_summary() const;
  int64_t peak_buffered_bytes() const;
  // The iterator of the placement running now.
  const exec::PipelineIterator& inner() const { return *inner_; }
  const Placement& placement() const { return placement_; }

  // Moves the rest of the epoch to `to` through the state; false (and
  // nothing changed) when the state cannot move there exactly.
  bool MoveTo(const Placement& to);
  // The dispatcher's workers failed the epoch with `error` (the dispatcher
  // unreachable past its timeout): moves the rest of it into this process
  // through its state, when the state moves exactly. False: `error` stands.
  bool FallBack(const absl::Status& error);

 private:
  friend class PlacedPipeline;
  PlacedIterator(std::shared_ptr<PlacedPipeline> owner, std::shared_ptr<const exec::Pipeline> pipeline,
                 std::unique_ptr<exec::PipelineIterator> inner, Placement placement, uint64_t epoch);
  void Install(std::shared_ptr<const exec::Pipeline> pipeline, std::unique_ptr<exec::PipelineIterator> inner);
  // Hands the window measured so far to the pipeline, once.
  void Bank();
  // Next, for the one consumer in it.
  absl::Status NextAlone(Batch* out, bool* end);

  std::shared_ptr<PlacedPipeline> owner_;
  std::shared_ptr<const exec::Pipeline> pipeline_;
  std::unique_ptr<exec::PipelineIterator> inner_;  // after pipeline_: destroyed first
  Placement placement_;
  const uint64_t epoch_;
  WindowMeter meter_;
  bool banked_ = false;
  // Cancel against a move: Cancel cancels inner_ only when it holds
  // `move_mu_`; a move that finds `cancelled_` set cancels its new inner.
  std::atomic<bool> cancelled_{false};
  // A consumer is in Next: a second one at once is refused (two threads
  // in it corrupted the heap).
  std::atomic<bool> in_next_{false};
  absl::Mutex move_mu_;
  int64_t skipped_before_ = 0;  // in placements the epoch left
  std::string skip_summary_before_;
  int64_t peak_before_ = 0;
  int64_t rows_ = 0;         // delivered (counted under "auto")
  bool whole_epoch_ = true;  // from its start, not resumed
};

}  // namespace sluice::placement

#endif  // SLUICE_PLACEMENT_PLACED_PIPELINE_H_
