// Prefetch node: a background thread keeps up to `count` elements ready so
// the consumer and the producers overlap.
#include <atomic>
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/thread_start.h"

namespace sluice::exec {
namespace {

class PrefetchIterator : public Iterator {
 public:
  PrefetchIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input)
      : ctx_(args.ctx), stats_(args.stats), knobs_(args.knobs), depth_(args.node->count), input_(std::move(input)) {
    ctx_->cancel.Register(&mu_, &cv_);
    thread_ = TryStartThread([this, name = args.node->name] {
      TraceBuffer::NameThread(name);
      Produce();
    });
    if (!thread_.joinable()) {  // the system refused it: the consumer is told
      queue_.push_back(Item{Batch(), ThreadStartError(absl::StrCat("prefetch node ", args.node->name))});
    }
  }

  ~PrefetchIterator() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      cv_.SignalAll();
    }
    if (thread_.joinable()) thread_.join();
    ctx_->cancel.Unregister(&cv_);
    for (const Item& item : queue_) ctx_->memory.Remove(item.bytes);
  }

  absl::Status GetNext(Batch* out, bool* end) override {
    absl::MutexLock lock(&mu_);
    while (queue_.empty() && !ctx_->cancel.cancelled()) {
      MemoryBudget::Demand demand(&waiting_, &ctx_->memory);
      cv_.Wait(&mu_);
    }
    if (queue_.empty()) return absl::CancelledError("pipeline cancelled");
    Item& item = queue_.front();
    if (!item.status.ok() || item.end) {  // stays queued: repeat the answer
      *end = item.end;
      return item.status;
    }
    *end = false;
    *out = std::move(item.batch);
    SetBuffered(--buffered_);
    ctx_->memory.Remove(item.bytes);
    queue_.pop_front();
    cv_.SignalAll();
    return absl::OkStatus();
  }

 private:
  struct Item {
    Batch batch;
    absl::Status status;
    bool end = false;
    int64_t bytes = 0;
  };

  void Produce() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        ScopedNs waited(stats_ ? &stats_->output_wait_ns : nullptr);
        while (!stopping_ && !ctx_->cancel.cancelled() && static_cast<int64_t>(queue_.size()) >= Depth()) {
          // The autotuner may deepen the queue meanwhile: look again soon.
          if (knobs_ != nullptr) {
            cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
          } else {
            cv_.Wait(&mu_);
          }
        }
        if (stopping_ || ctx_->cancel.cancelled()) return;
      }
      {
        ScopedNs waited(stats_ ? &stats_->output_wait_ns : nullptr);
        // While one is buffered, the next starts only once it fits beside
        // it (as big as the last); the nodes below count it as they make it.
        if (!ctx_->memory.WaitForRoom(&buffered_, &waiting_, last_bytes_)) return;
        ctx_->memory.Unreserve(last_bytes_);
      }
      Item item;
      item.status = input_->GetNext(&item.batch, &item.end);
      item.bytes = item.status.ok() && !item.end ? static_cast<int64_t>(item.batch.ByteSize()) : 0;
      const bool last = !item.status.ok() || item.end;
      absl::MutexLock lock(&mu_);
      if (!last) {
        SetBuffered(++buffered_);
        last_bytes_ = item.bytes;
      }
      ctx_->memory.Add(item.bytes);
      queue_.push_back(std::move(item));
      cv_.SignalAll();
      if (last) return;
    }
  }

  int64_t Depth() const { return knobs_ ? knobs_->depth.load(std::memory_order_relaxed) : depth_; }

  void SetBuffered(int64_t n) {
    if (stats_ != nullptr) stats_->buffered.store(n, std::memory_order_relaxed);
  }

  ExecContext* ctx_;
  NodeStats* const stats_;  // may be null
  NodeKnobs* const knobs_;  // may be null
  const int64_t depth_;
  std::unique_ptr<Iterator> input_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> buffered_{0};  // elements queued for the consumer
  std::atomic<int64_t> waiting_{0};   // threads in GetNext waiting for one
  int64_t last_bytes_ = 0;            // of the last element made (Produce's own)
  std::thread thread_;                // last: starts after the members it uses
};

}  // namespace

std::unique_ptr<Iterator> MakePrefetchIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<PrefetchIterator>(args, std::move(input));
}

}  // namespace sluice::exec
