// Repeat node: runs its input `count` times (forever when count <= 0), each
// time as a new epoch, so shuffles and random ops differ between repeats;
// before batching, its chunks stay whole across the epochs' seams. A
// resumed epoch starts at the repeat's epoch it was saved in.
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"

namespace sluice::exec {
namespace {

class RepeatIterator : public Iterator {
 public:
  // `chunk_rows` > 0: keep the chunks of that size aligned across epochs.
  RepeatIterator(const IteratorArgs& args, int64_t chunk_rows, InputFactory input)
      : count_(args.node->count),
        outer_epoch_(args.epoch),
        chunk_rows_(chunk_rows),
        seams_(args.ctx->repeat_seams.get()),
        make_input_(std::move(input)) {
    if (args.ctx->resume) {
      done_ = args.ctx->resume->repeat;
      rows_ = args.ctx->resume->rows;
      empty_run_ = false;  // the resumed epoch may have nothing left, yet had rows
    }
  }

  absl::Status GetNext(Batch* out, bool* end) override {
    while (count_ <= 0 || done_ < count_) {
      if (!input_) {
        // The rest of the batch the last epoch left unfinished, if any.
        const int64_t into_chunk = chunk_rows_ > 0 ? rows_ % chunk_rows_ : 0;
        if (seams_ != nullptr) seams_->Add(rows_, done_);
        input_ = make_input_(RepeatEpoch(outer_epoch_, done_), into_chunk > 0 ? chunk_rows_ - into_chunk : 0);
      }
      bool input_end = false;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(out, &input_end));
      if (!input_end) {
        *end = false;
        empty_run_ = false;
        rows_ += out->rows;
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
  const int64_t chunk_rows_;
  RepeatSeams* const seams_;  // null when the position is not tracked
  InputFactory make_input_;
  int64_t rows_ = 0;  // handed out, all epochs
  std::unique_ptr<Iterator> input_;
  int64_t done_ = 0;
  bool empty_run_ = true;
};

}  // namespace

std::unique_ptr<Iterator> MakeRepeatIterator(const IteratorArgs& args, InputFactory input) {
  const bool rechunk = !args.node->batched && args.chunk_rows > 0;
  auto repeat = std::make_unique<RepeatIterator>(args, rechunk ? args.chunk_rows : 0, std::move(input));
  // Each epoch's last chunk is short: without re-cutting, every later chunk
  // would straddle batches, and the batch node would copy every batch
  // (after a map, the biggest values of the pipeline) instead of passing
  // chunks through. Re-cutting joins the seam's two pieces here, where rows
  // are smaller; the next epoch's source starts with the seam's rest, so
  // its later chunks pass through whole.
  if (!rechunk) return repeat;
  return MakeRechunkIterator(args, std::move(repeat));
}

}  // namespace sluice::exec
