// Repeat node: runs its input `count` times (forever when count <= 0), each
// time as a new epoch, so shuffles and random ops differ between repeats;
// before batching, its chunks stay whole across the epochs' seams.
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"

namespace sluice::exec {
namespace {

// Inner epochs of outer epoch e are e * kStride + i: distinct for every
// (e, i) while i < kStride.
constexpr uint64_t kStride = uint64_t{1} << 20;

class RepeatIterator : public Iterator {
 public:
  RepeatIterator(const IteratorArgs& args, InputFactory input)
      : count_(args.node->count), outer_epoch_(args.epoch), make_input_(std::move(input)) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    while (count_ <= 0 || done_ < count_) {
      if (!input_) input_ = make_input_(outer_epoch_ * kStride + done_);
      bool input_end = false;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(out, &input_end));
      if (!input_end) {
        *end = false;
        empty_run_ = false;
        return absl::OkStatus();
      }
      input_.reset();
      ++done_;
      if (empty_run_) break;  // an empty input would repeat forever
      empty_run_ = true;
    }
    *end = true;
    return absl::OkStatus();
  }

 private:
  const int64_t count_;
  const uint64_t outer_epoch_;
  InputFactory make_input_;
  std::unique_ptr<Iterator> input_;
  int64_t done_ = 0;
  bool empty_run_ = true;
};

}  // namespace

std::unique_ptr<Iterator> MakeRepeatIterator(const IteratorArgs& args, InputFactory input) {
  auto repeat = std::make_unique<RepeatIterator>(args, std::move(input));
  // Each epoch's last chunk is short: without re-cutting, every later chunk
  // would straddle batches, and the batch node would copy every batch
  // (after a map, the biggest values of the pipeline) instead of passing
  // chunks through. Re-cutting copies the (smaller) rows here instead.
  if (args.node->batched || args.chunk_rows <= 0) return repeat;
  return MakeRechunkIterator(args, std::move(repeat));
}

}  // namespace sluice::exec
