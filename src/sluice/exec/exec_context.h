// State shared by the nodes of one running pipeline: the CPU and memory
// budgets, cancellation, and counters for skipped records.
#ifndef SLUICE_EXEC_EXEC_CONTEXT_H_
#define SLUICE_EXEC_EXEC_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "sluice/core/buffer_pool.h"
#include "sluice/core/core_share.h"
#include "sluice/exec/autotune.h"
#include "sluice/exec/epoch_progress.h"
#include "sluice/exec/node_stats.h"
#include "sluice/exec/shard_log.h"
#include "sluice/exec/shuffle_state.h"
#include "sluice/exec/trace_buffer.h"
#include "sluice/io/corruption_log.h"
#include "sluice/io/file_split.h"
#include "sluice/ops/op_registry.h"

namespace sluice::exec {

// Wakes every registered wait when cancelled, so threads blocked anywhere in
// the pipeline exit promptly at teardown. Thread-safe.
class Cancellation {
 public:
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // For waits outside the engine, which poll it (ops::KernelContext).
  const std::atomic<bool>* flag() const { return &cancelled_; }
  void Cancel();
  // `mu` guards the state `cv` waits on; both must outlive the registration.
  void Register(absl::Mutex* mu, absl::CondVar* cv);
  void Unregister(absl::CondVar* cv);

 private:
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::vector<std::pair<absl::Mutex*, absl::CondVar*>> waits_ ABSL_GUARDED_BY(mu_);
};

// At most `tokens` threads compute at once across all nodes, so --threads N
// means N cores of work however many stages run concurrently. A thread
// holds a token only while computing, never while waiting on another node,
// so it cannot deadlock. Thread-safe.
class CpuBudget {
 public:
  CpuBudget(int tokens, Cancellation* cancel);
  ~CpuBudget();
  // False when cancelled while waiting.
  bool Acquire();
  void Release();

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  int free_ ABSL_GUARDED_BY(mu_);
  Cancellation* cancel_;
};

class CpuToken : public CoreShare {
 public:
  explicit CpuToken(CpuBudget* budget) : budget_(budget), held_(budget->Acquire()) {}
  ~CpuToken() override {
    if (held_) budget_->Release();
  }
  bool held() const { return held_; }

  void Lend() override {
    if (held_) budget_->Release();
    held_ = false;
  }
  bool Reclaim() override { return held_ = budget_->Acquire(); }

 private:
  CpuBudget* budget_;
  bool held_;
};

// Bounds the bytes in use in the pipeline's buffer pool (what nodes make,
// hold and hand on, and what the consumer still holds). A node about to
// make a new element waits while that element would not fit, as long as
// it still owes an element of its own (finished and not taken, or, for a
// map node, admitted and running) or no one waits on its next element. A
// node that owes none while a caller waits on it may be what the consumer
// waits on, so it proceeds: no deadlock, even for a consumer that keeps
// every batch, and the overshoot is then at most one element per node.
// A consumer that gives each batch back before it asks for the one after
// next (a training loop) keeps the nodes within the budget. Also counts
// the bytes of finished elements buffered between nodes, for the
// statistics. Thread-safe.
class MemoryBudget : public BufferPool::Observer {
 public:
  MemoryBudget(int64_t limit, BufferPool* pool, Cancellation* cancel);
  ~MemoryBudget() override;
  // Blocks while the pool's bytes in use, the bytes reserved and `wanted`
  // exceed the limit, and *owed > 0 (the caller's count of elements it
  // owes) or *waiting == 0 (the threads waiting on its next element, see
  // Demand); false when cancelled. Otherwise reserves `wanted` until
  // Unreserve: a node admitted and still pulling its input has not yet
  // taken its outputs from the pool, and a second admission meanwhile must
  // count them (two map runners admitted at once went a whole element
  // over).
  bool WaitForRoom(const std::atomic<int64_t>* owed, const std::atomic<int64_t>* waiting, int64_t wanted);
  // The same, waiting only while may_wait() holds (it is asked again on
  // each wake-up, under the budget's lock: it may read atomics only).
  bool WaitForRoom(const std::function<bool()>& may_wait, int64_t wanted);
  // Reserves `wanted` as WaitForRoom does if it fits now; never waits.
  bool TryReserve(int64_t wanted);
  // Whether `wanted` more bytes would pass the limit now (a node that can
  // give memory back at a cost, as a shuffle by compacting, does it then).
  bool Tight(int64_t wanted) const;
  // The reserved bytes are now in the pool's bytes in use, or never will be.
  void Unreserve(int64_t bytes);
  void Add(int64_t bytes);
  void Remove(int64_t bytes);
  // Wakes the waiters: a count they wait on changed.
  void Notify();
  // Counts a thread waiting on a node's next element while it lives, and
  // wakes the node's producers waiting for room: that element is wanted.
  class Demand {
   public:
    Demand(std::atomic<int64_t>* waiting, MemoryBudget* budget) : waiting_(waiting) {
      waiting_->fetch_add(1);
      budget->Notify();
    }
    ~Demand() { waiting_->fetch_sub(1); }
    Demand(const Demand&) = delete;
    Demand& operator=(const Demand&) = delete;

   private:
    std::atomic<int64_t>* waiting_;
  };
  void OnRelease() override { Notify(); }
  // Counts `bytes()` too, memory the pipeline holds outside the pool (the
  // service client's rings, object blocks fetched ahead). REQUIRES: before
  // the pipeline runs.
  void CountAlso(std::function<int64_t()> bytes) { outside_.push_back(std::move(bytes)); }
  // High-water mark of the bytes buffered between nodes.
  int64_t peak() const;
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  BufferPool* const pool_;
  std::vector<std::function<int64_t()>> outside_;
  Cancellation* cancel_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  // Whether `wanted` more bytes would pass the limit.
  bool Full(int64_t wanted) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
};

// An error set from outside the consumer's thread that ends its iterator at
// once, whatever elements the nodes still buffer (a distributed epoch that
// a newer iterator took over: what this one prefetched is that one's too).
// Thread-safe.
class IteratorFailure {
 public:
  // The first status set stays.
  void Set(const absl::Status& status);
  // OK until Set.
  absl::Status Get() const;

 private:
  std::atomic<bool> set_{false};
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

struct ExecContext {
  // `pool`: the pipeline's, which the memory budget bounds; shared, as an
  // iterator may outlive its pipeline.
  ExecContext(uint64_t seed, int threads, int64_t memory_limit, bool ordered, std::shared_ptr<BufferPool> shared_pool)
      : seed(seed),
        threads(threads),
        ordered(ordered),
        pool_owner(std::move(shared_pool)),
        pool(pool_owner.get()),
        cpu(threads, &cancel),
        memory(memory_limit, pool_owner.get(), &cancel) {}

  const uint64_t seed;
  const int threads;
  const bool ordered;
  const std::shared_ptr<BufferPool> pool_owner;
  BufferPool* const pool;
  Cancellation cancel;
  IteratorFailure failure;
  CpuBudget cpu;
  MemoryBudget memory;
  // Device maps' page-locked staging pools, beside `pool`: their bytes in
  // use count against `memory`; their caches are trimmed with the pool's.
  std::vector<BufferPool*> staging_pools;
  // The most bytes a source split read ahead has held, kept by the
  // pipeline from epoch to epoch (SplitReadAhead); null: each read-ahead's own.
  std::shared_ptr<std::atomic<int64_t>> split_bytes;
  io::CorruptionLog skips;
  // Records a source, or rows a map's Python op, has begun inside elements
  // not yet out (a Python dataset's items, a slow op's rows): a service
  // worker's heartbeat reports them as its split's progress. Shared: the
  // heartbeat may read it as the iterator goes.
  const std::shared_ptr<std::atomic<int64_t>> progress = std::make_shared<std::atomic<int64_t>>(0);
  // on_corrupt "skip": a row a kernel refuses is dropped and logged in
  // `skips`, not the pipeline's error.
  bool skip_corrupt = false;
  // The registry the pipeline was compiled with (its device runtimes).
  const ops::OpRegistry* registry = nullptr;
  // `backend`'s runtime; null for cpu.
  ops::DeviceRuntime* runtime(ops::Backend backend) const {
    return backend == ops::Backend::kCpu || registry == nullptr ? nullptr : registry->runtime(backend);
  }
  std::unique_ptr<PipelineStats> stats;  // null when the pipeline opted out
  // Per node; null for nodes without runtime settings.
  std::vector<std::unique_ptr<NodeKnobs>> knobs;
  // Where spans go while a profile traces the run; null otherwise.
  std::atomic<TraceBuffer*> trace{nullptr};
  // When set, the source reads these splits, in this order, instead of all
  // of its own (a service worker running the splits it was handed).
  std::vector<io::Split> splits;
  bool only_splits = false;

  // Set when the pipeline's iterator tracks its position (exec/resume.h):
  // each epoch's split order, the shuffle's marks, the repeat's seams.
  std::unique_ptr<SplitOrders> orders;
  std::unique_ptr<ShuffleLog> shuffle_log;
  std::unique_ptr<RepeatSeams> repeat_seams;
  std::unique_ptr<DeliveryLedger> ledger;  // unordered mode
  std::unique_ptr<ShardLog> shard_log;     // a sharded pipeline
  // A resumed epoch: where it stood, and the number of the epoch (a
  // repeat's) whose source and shuffle start there.
  std::optional<EpochPosition> resume;
  uint64_t resume_epoch = 0;
  // The resumed shuffle's buffer; and when set, the rows of it the resumed
  // source hands on, passing over the others.
  std::optional<ShuffleReplay> resume_buffer;
  std::optional<RowSelection> resume_selection;
  // `resume` when epoch `epoch` is the resumed one; null otherwise.
  const EpochPosition* ResumeOf(uint64_t epoch) const { return resume && epoch == resume_epoch ? &*resume : nullptr; }
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_EXEC_CONTEXT_H_
