// Map node: runs the op chain on input chunks with `parallelism` runner
// threads. Runners share work at row-range granularity: a chunk (often a
// whole batch) is cut into ranges that idle runners claim, each writing its
// rows straight into the chunk's output buffers. So one large batch keeps
// every thread busy (no idle core at the end of an epoch), and several
// chunks are in flight at once. Output is in input order by default, or in
// completion order when the pipeline opts out of ordering.
#include <atomic>
#include <deque>
#include <limits>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/map_plan.h"
#include "sluice/exec/read_pacing.h"
#include "sluice/exec/row_copier.h"
#include "sluice/exec/thread_start.h"

namespace sluice::exec {
namespace {

// Ranges smaller than this are not worth a hand-off between threads.
constexpr int64_t kMinRangeRows = 32;
// Ranges a chunk is cut into per runner: small enough that while one runner
// pulls the next chunk, the others still find rows to claim (ReadPacing).
constexpr int64_t kRangesPerRunner = 4;

class MapIterator : public Iterator {
 public:
  MapIterator(const IteratorArgs& args, std::unique_ptr<MapPlan> plan, std::unique_ptr<Iterator> input)
      : ctx_(args.ctx),
        pool_(args.output_pool()),
        node_(*args.node),
        stats_(args.stats),
        knobs_(args.knobs),
        epoch_(args.epoch),
        parallelism_(node_.parallelism > 0 ? node_.parallelism : ctx_->threads),
        prefetch_depth_(args.prefetch_depth),
        plan_(std::move(plan)),
        chunk_rows_(args.chunk_rows),
        element_bytes_(pool_ == ctx_->pool ? plan_->ChunkBlockBytes(args.chunk_rows) : 0),
        input_(std::move(input)) {
    ctx_->cancel.Register(&mu_, &cv_);
    // Runners the system refused leave the map to those it started (their
    // count read under mu_); none, and the map fails.
    absl::MutexLock lock(&mu_);
    parallelism_ = StartThreads(
        parallelism_,
        [this](int i) {
          TraceBuffer::NameThread(absl::StrCat(node_.name, "/", i));
          {
            absl::MutexLock started(&mu_);
          }  // parallelism_ is set
          RunnerLoop(i);
        },
        &runners_);
    if (parallelism_ == 0) start_error_ = ThreadStartError(absl::StrCat("map node ", node_.name));
  }

  ~MapIterator() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      cv_.SignalAll();
    }
    for (std::thread& t : runners_) t.join();
    ctx_->cancel.Unregister(&cv_);
    for (const auto& slot : slots_) {
      if (slot->done) ctx_->memory.Remove(slot->bytes);
    }
  }

  absl::Status GetNext(Batch* out, bool* end) override {
    absl::MutexLock lock(&mu_);
    SLUICE_RETURN_IF_ERROR(start_error_);
    while (true) {
      if (ctx_->cancel.cancelled()) return absl::CancelledError("pipeline cancelled");
      std::shared_ptr<Slot> slot = TakeReady();
      if (slot != nullptr) {
        if (slot->bytes > 0) {
          SetBuffered(--buffered_);
          --owed_;
        }
        ctx_->memory.Remove(slot->bytes);
        cv_.SignalAll();
        if (!slot->status.ok()) return slot->status;
        *end = slot->end;
        if (slot->end) {
          slots_.push_front(slot);  // keep answering end
          return absl::OkStatus();
        }
        *out = std::move(slot->result);
        return absl::OkStatus();
      }
      MemoryBudget::Demand demand(&waiting_, &ctx_->memory);
      cv_.Wait(&mu_);
    }
  }

 private:
  // One input chunk and its progress.
  struct Slot {
    Batch input;
    std::vector<Tensor> outputs;
    int64_t first_sample = 0;
    int64_t range_rows = 0;
    int64_t next_row = 0;                                     // first unclaimed row
    int64_t running = 0;                                      // claimed ranges not yet finished
    int64_t error_row = std::numeric_limits<int64_t>::max();  // range of slot.status
    std::map<int64_t, std::string> refused;                   // rows a kernel refused, skipped (on_corrupt "skip")
    Batch result;
    absl::Status status;
    bool open = false;  // input pulled, ranges claimable
    bool done = false;
    bool end = false;
    int64_t bytes = 0;
  };
  struct Claim {
    std::shared_ptr<Slot> slot;
    int64_t begin = 0, end = 0;
  };

  // The next deliverable slot, removed from the queue; null if none yet.
  std::shared_ptr<Slot> TakeReady() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (slots_.empty()) return nullptr;
    auto take = [this](std::deque<std::shared_ptr<Slot>>::iterator it) {
      std::shared_ptr<Slot> slot = *it;
      slots_.erase(it);
      return slot;
    };
    if (ctx_->ordered) return slots_.front()->done ? take(slots_.begin()) : nullptr;
    // Unordered: any finished element (or error); the end only once nothing
    // else is left.
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
      if ((*it)->done && !(*it)->end) return take(it);
    }
    if (slots_.size() == 1 && slots_.front()->done) return take(slots_.begin());
    return nullptr;
  }

  // Claims the next unclaimed range of the oldest open slot, if any.
  bool ClaimRange(Claim* claim) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::shared_ptr<Slot>& slot : slots_) {
      if (!slot->open || !slot->status.ok() || slot->next_row >= slot->input.rows) continue;
      claim->slot = slot;
      claim->begin = slot->next_row;
      claim->end = std::min(slot->input.rows, slot->next_row + slot->range_rows);
      slot->next_row = claim->end;
      ++slot->running;
      return true;
    }
    return false;
  }

  // Rows of open slots that no runner has claimed yet.
  int64_t UnclaimedRows() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t rows = 0;
    for (const std::shared_ptr<Slot>& slot : slots_) {
      if (slot->open && slot->status.ok()) rows += std::max<int64_t>(0, slot->input.rows - slot->next_row);
    }
    return rows;
  }
  // Whether the other runners would run out of rows during a pull.
  bool LowOnWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pacing_.PullNow(UnclaimedRows(), Active() - 1, chunk_rows_);
  }

  // Whether a runner should pull the next chunk before claiming a range
  // (PullAhead then tries the input's lock: a runner holding it is pulling).
  bool ReadsAhead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return Active() > 1 && !input_done_ && !plan_->whole_chunks() &&
           static_cast<int64_t>(slots_.size()) < MaxInFlight() && LowOnWork();
  }

  // Pulls the next input chunk into a new slot and claims its first range.
  // Returns false when the runner should exit.
  bool OpenSlot(Claim* claim) {
    absl::MutexLock input_lock(&input_mu_);
    std::shared_ptr<Slot> slot;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        if (stopping_ || input_done_ || ctx_->cancel.cancelled()) return false;
        if (ClaimRange(claim)) return true;  // opened by another runner meanwhile
        if (static_cast<int64_t>(slots_.size()) < MaxInFlight()) break;
        ScopedNs waited(stats_ ? &stats_->output_wait_ns : nullptr);  // downstream holds every slot
        cv_.Wait(&mu_);
      }
      slot = ReserveSlot();
    }
    {
      // Under input_mu_: one runner of this node at a time is admitted, so
      // the node owes at most one element beyond the budget.
      ScopedNs waited(stats_ ? &stats_->output_wait_ns : nullptr);
      if (!ctx_->memory.WaitForRoom(&owed_, &waiting_, element_bytes_)) return false;
    }
    return Fill(slot, claim);
  }

  // Pulls the next chunk ahead (ReadsAhead) and claims its first range, if
  // no other runner is pulling and the budget has room now. It never
  // waits: the rows it leaves unclaimed meanwhile may be the ones the
  // consumer waits on, and a pull ahead that waited for room kept the
  // runner that would have run them waiting on the input's lock.
  void PullAhead(Claim* claim) {
    if (!input_mu_.TryLock()) return;
    std::shared_ptr<Slot> slot;
    {
      absl::MutexLock lock(&mu_);
      if (!stopping_ && !ctx_->cancel.cancelled() && ReadsAhead() && ctx_->memory.TryReserve(element_bytes_)) {
        slot = ReserveSlot();
      }
    }
    if (slot != nullptr) Fill(slot, claim);  // at the input's end the runner goes on claiming
    input_mu_.Unlock();
  }

  // A new slot, in input order. REQUIRES: input_mu_ held.
  std::shared_ptr<Slot> ReserveSlot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto slot = std::make_shared<Slot>();
    slots_.push_back(slot);
    return slot;
  }

  // Pulls the next input chunk into `slot`, admitted with element_bytes_
  // reserved, and claims its first range. Returns false at the input's end
  // or on its error. REQUIRES: input_mu_ held.
  bool Fill(const std::shared_ptr<Slot>& slot, Claim* claim) {
    ++owed_;
    bool end = false;
    Batch in;
    const int64_t pull_start = NowNs();
    absl::Status status = input_->GetNext(&in, &end);
    const int64_t pull_ns = NowNs() - pull_start;
    std::vector<Tensor> outputs;
    if (status.ok() && !end) {
      absl::StatusOr<std::vector<Tensor>> allocated = plan_->AllocateOutputs(in, pool_, RoomRows(in.rows));
      if (allocated.ok()) outputs = *std::move(allocated);
      status = WithContext(allocated.status(), absl::StrCat("node '", node_.name, "'"));
    }
    ctx_->memory.Unreserve(element_bytes_);
    absl::MutexLock lock(&mu_);
    pacing_.Pulled(in.rows, pull_ns);
    slot->first_sample = next_sample_;
    next_sample_ += in.rows;
    if (!status.ok() || end || in.rows == 0) {
      Forgive();  // no element comes of it
      input_done_ = input_done_ || !status.ok() || end;
      slot->status = status;
      slot->end = end;
      slot->done = true;
      cv_.SignalAll();
      return status.ok() && !end;
    }
    slot->input = std::move(in);
    slot->outputs = std::move(outputs);
    const int64_t active = Active();
    const int64_t ranges = kRangesPerRunner * active;
    slot->range_rows =
        plan_->whole_chunks() ? slot->input.rows : std::max(kMinRangeRows, (slot->input.rows + ranges - 1) / ranges);
    slot->open = true;
    ClaimRange(claim);
    cv_.SignalAll();  // idle runners can claim the other ranges
    return true;
  }

  // Runners the autotuner has set aside wait here, checking now and then.
  bool Parked(int index) {
    if (index < Active()) return false;
    absl::MutexLock lock(&mu_);
    if (!stopping_ && !ctx_->cancel.cancelled()) cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
    return true;
  }

  void RunnerLoop(int index) {
    while (true) {
      if (Parked(index)) {
        absl::MutexLock lock(&mu_);
        if (stopping_ || ctx_->cancel.cancelled()) return;
        continue;
      }
      Claim claim;
      bool ahead = false;
      {
        absl::MutexLock lock(&mu_);
        ahead = ReadsAhead();
      }
      if (ahead) PullAhead(&claim);
      bool claimed = claim.slot != nullptr;
      if (!claimed) {
        absl::MutexLock lock(&mu_);
        claimed = ClaimRange(&claim);
      }
      if (!claimed && !OpenSlot(&claim)) return;
      if (claim.slot == nullptr) continue;  // an empty chunk: nothing to run
      Slot& slot = *claim.slot;
      absl::Status status;
      std::map<int64_t, std::string> refused;
      int64_t ran_ns = 0;
      {
        CpuToken token(&ctx_->cpu);
        if (!token.held()) return;
        const int64_t run_start = NowNs();
        MapPlan::RunArgs run{ctx_->seed,
                             epoch_,
                             slot.first_sample,
                             pool_,
                             stats_ ? &stats_->op_busy_ns : nullptr,
                             ctx_->trace.load(std::memory_order_relaxed),
                             ctx_->cancel.flag(),
                             &token,
                             ctx_->progress.get()};
        ScopedNs busy(stats_ ? &stats_->busy_ns : nullptr);
        status = plan_->RunRows(slot.input, claim.begin, claim.end, run, slot.outputs);
        if (!status.ok() && SkipsRowsOf(status)) status = RunRowByRow(slot, claim, run, &refused);
        ran_ns = NowNs() - run_start;
      }
      absl::MutexLock lock(&mu_);
      pacing_.Ran(claim.end - claim.begin, ran_ns);
      slot.refused.insert(refused.begin(), refused.end());
      // Report the first failing row whichever thread finds it first, so
      // errors are as deterministic as the data.
      if (!status.ok() && claim.begin < slot.error_row) {
        slot.status = WithContext(status, absl::StrCat("node '", node_.name, "'"));
        slot.error_row = claim.begin;
      }
      --slot.running;
      const bool finished = slot.running == 0 && (slot.next_row >= slot.input.rows || !slot.status.ok());
      if (!finished) continue;
      if (slot.status.ok()) {
        slot.result = plan_->Assemble(slot.input, slot.outputs, pool_);
        if (!slot.refused.empty()) slot.result = WithoutRefused(slot);
        slot.bytes = static_cast<int64_t>(slot.result.ByteSize());
        ctx_->memory.Add(slot.bytes);
      }
      if (slot.bytes > 0) {
        SetBuffered(++buffered_);  // owed until GetNext takes it
      } else {
        Forgive();
      }
      slot.input = Batch();
      slot.outputs.clear();
      slot.done = true;
      cv_.SignalAll();
    }
  }

  // Under on_corrupt "skip", a kernel's refusal of some rows (bad data, not
  // a failure of the machine: a declared feature missing from a record is
  // NotFound) costs those rows, not the batch.
  bool SkipsRowsOf(const absl::Status& status) const {
    return ctx_->skip_corrupt && !plan_->whole_chunks() &&
           (absl::IsDataLoss(status) || absl::IsInvalidArgument(status) || absl::IsOutOfRange(status) ||
            absl::IsNotFound(status));
  }

  // Runs the claimed rows one at a time, noting those refused.
  absl::Status RunRowByRow(Slot& slot, const Claim& claim, const MapPlan::RunArgs& run,
                           std::map<int64_t, std::string>* refused) {
    for (int64_t r = claim.begin; r < claim.end; ++r) {
      absl::Status row = plan_->RunRows(slot.input, r, r + 1, run, slot.outputs);
      if (row.ok()) continue;
      if (!SkipsRowsOf(row)) return row;
      plan_->ForgetRow(r, slot.outputs);
      refused->emplace(r, std::string(row.message()));
    }
    return absl::OkStatus();
  }

  // The slot's result without its refused rows, each logged as skipped.
  Batch WithoutRefused(const Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Batch& all = slot.result;
    RowCopier copier(plan_->output_schema(), all.rows - static_cast<int64_t>(slot.refused.size()), pool_);
    int64_t from = 0;
    for (const auto& [row, message] : slot.refused) {
      if (row > from) copier.Append(all, from, row);
      from = row + 1;
      ctx_->skips.Add(slot.input.provenance.File(row), 1, 0, absl::StrCat("node '", node_.name, "': ", message));
      // A row the ledger cannot place is read and skipped again on resume.
      if (ctx_->ledger != nullptr) ctx_->ledger->Done(slot.input.provenance, row, row + 1).IgnoreError();
    }
    if (from < all.rows) copier.Append(all, from, all.rows);
    Batch kept = copier.Finish();
    if (from == all.rows) kept.provenance.SetReadThrough(slot.input.provenance.ReadThrough(slot.input.rows));
    return kept;
  }

  // Runners taking work: all, or as many as the autotuner says. A device
  // map keeps two: each queues on its own stream, so one batch's copy to
  // the device overlaps the previous batch's kernels.
  int Active() const {
    const int least = node_.backend != ops::Backend::kCpu ? std::min(2, parallelism_) : 1;
    return knobs_ ? std::clamp(knobs_->parallelism.load(std::memory_order_relaxed), least, parallelism_) : parallelism_;
  }
  // Chunks in flight: one per active runner, one being opened, and the
  // finished ones kept ready (a prefetch folded into this map).
  int64_t MaxInFlight() const {
    const int64_t depth =
        knobs_ && prefetch_depth_ > 0 ? knobs_->depth.load(std::memory_order_relaxed) : prefetch_depth_;
    return Active() + 1 + depth;
  }

  // Rows a chunk's blocks have room for: a whole chunk's for one cut short
  // at a split's end (half a chunk or more), so the rest of its batch is
  // copied in after it; a smaller one (a source's short reads, the rest
  // of a batch) gets its own rows, not blocks mostly empty.
  int64_t RoomRows(int64_t rows) const { return rows * 2 >= chunk_rows_ ? chunk_rows_ : rows; }

  // An admitted slot that yields no element (an error, the end, no rows):
  // the node owes it no longer, and a runner waiting on that may go on.
  void Forgive() {
    --owed_;
    ctx_->memory.Notify();
  }

  void SetBuffered(int64_t n) {
    if (stats_ != nullptr) stats_->buffered.store(n, std::memory_order_relaxed);
  }

  ExecContext* ctx_;
  BufferPool* pool_;
  const graph::CompiledNode& node_;
  NodeStats* const stats_;  // may be null
  NodeKnobs* const knobs_;  // may be null
  const uint64_t epoch_;
  int parallelism_;  // runner threads (those started, once started)
  absl::Status start_error_ ABSL_GUARDED_BY(mu_);
  const int64_t prefetch_depth_;
  std::unique_ptr<MapPlan> plan_;
  const int64_t chunk_rows_;     // of a whole chunk, as the budget counts one
  const int64_t element_bytes_;  // what admitting a chunk takes from the budgeted pool
  std::unique_ptr<Iterator> input_;

  absl::Mutex input_mu_;  // serializes pulls from input_, so slots keep input order

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  int64_t next_sample_ ABSL_GUARDED_BY(mu_) = 0;
  bool input_done_ ABSL_GUARDED_BY(mu_) = false;
  ReadPacing pacing_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> buffered_{0};  // finished slots not yet taken
  // Slots admitted past the memory budget that are running, or finished and
  // not yet taken: what a runner waits on while the budget is exceeded.
  std::atomic<int64_t> owed_{0};
  std::atomic<int64_t> waiting_{0};  // threads in GetNext waiting for a slot
  // Last member: threads start after everything they use exists.
  std::vector<std::thread> runners_;
};

}  // namespace

std::unique_ptr<Iterator> MakeMapIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<MapIterator>(args, MapPlan::Make(*args.node, args.ctx->runtime(args.node->backend)),
                                       std::move(input));
}

}  // namespace sluice::exec
