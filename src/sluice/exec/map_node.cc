// Map node: runs the op chain on input chunks with `parallelism` runner
// threads, several chunks in flight, output in input order by default (or
// as completed, when the pipeline opts out of ordering).
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/map_plan.h"

namespace sluice::exec {
namespace {

class MapIterator : public Iterator {
 public:
  MapIterator(const IteratorArgs& args, std::unique_ptr<MapPlan> plan,
              std::unique_ptr<Iterator> input)
      : ctx_(args.ctx),
        node_(*args.node),
        epoch_(args.epoch),
        plan_(std::move(plan)),
        input_(std::move(input)) {
    const int parallelism = node_.parallelism > 0 ? node_.parallelism : ctx_->threads;
    max_in_flight_ = 2 * parallelism;
    ctx_->cancel.Register(&mu_, &cv_);
    for (int i = 0; i < parallelism; ++i) runners_.emplace_back([this] { RunnerLoop(); });
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
    while (true) {
      if (ctx_->cancel.cancelled()) return absl::CancelledError("pipeline cancelled");
      std::shared_ptr<Slot> slot = TakeReady();
      if (slot != nullptr) {
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
      cv_.Wait(&mu_);
    }
  }

 private:
  struct Slot {
    Batch result;
    absl::Status status;
    bool done = false;
    bool end = false;
    int64_t bytes = 0;
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

  void RunnerLoop() {
    while (true) {
      std::shared_ptr<Slot> slot;
      Batch in;
      bool end = false;
      int64_t first_sample = 0;
      absl::Status status;
      {
        // Reserving the slot and pulling the input under one lock keeps
        // slots in input order.
        absl::MutexLock input_lock(&input_mu_);
        if (!ctx_->memory.WaitForRoom()) return;
        {
          absl::MutexLock lock(&mu_);
          while (!stopping_ && !input_done_ && !ctx_->cancel.cancelled() &&
                 static_cast<int64_t>(slots_.size()) >= max_in_flight_) {
            cv_.Wait(&mu_);
          }
          if (stopping_ || input_done_ || ctx_->cancel.cancelled()) return;
          slot = std::make_shared<Slot>();
          slots_.push_back(slot);
        }
        status = input_->GetNext(&in, &end);
        first_sample = next_sample_;
        next_sample_ += in.rows;
        if (!status.ok() || end) {
          absl::MutexLock lock(&mu_);
          input_done_ = true;
        }
      }
      Batch result;
      if (status.ok() && !end) {
        CpuToken token(&ctx_->cpu);
        if (!token.held()) return;
        MapPlan::RunArgs run{ctx_->seed, epoch_, first_sample, ctx_->pool};
        status = plan_->Run(in, run, &result);
        if (!status.ok()) status = WithContext(status, absl::StrCat("node '", node_.name, "'"));
      }
      absl::MutexLock lock(&mu_);
      slot->status = status;
      slot->end = end;
      slot->bytes = static_cast<int64_t>(result.ByteSize());
      slot->result = std::move(result);
      slot->done = true;
      ctx_->memory.Add(slot->bytes);
      cv_.SignalAll();
      if (!status.ok() || end) return;
    }
  }

  ExecContext* ctx_;
  const graph::CompiledNode& node_;
  const uint64_t epoch_;
  std::unique_ptr<MapPlan> plan_;
  std::unique_ptr<Iterator> input_;
  int64_t max_in_flight_;

  absl::Mutex input_mu_;  // serializes pulls from input_
  int64_t next_sample_ ABSL_GUARDED_BY(input_mu_) = 0;

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  bool input_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Last member: threads start after everything they use exists.
  std::vector<std::thread> runners_;
};

}  // namespace

std::unique_ptr<Iterator> MakeMapIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<MapIterator>(args, MapPlan::Make(args.node->input_schema, args.node->ops),
                                       std::move(input));
}

}  // namespace sluice::exec
