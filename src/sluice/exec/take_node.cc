// Take node: the first `count` elements (rows before the batch node,
// batches after it). A resumed epoch counts those delivered before the save
// (no row is dropped after a resumable take: exec/resume.h).
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"

namespace sluice::exec {
namespace {

// Elements this take passed on before the resumed epoch's save.
int64_t Delivered(const IteratorArgs& args) {
  if (!args.ctx->resume) return 0;
  return args.node->batched ? args.ctx->resume->elements : args.ctx->resume->rows;
}

class TakeIterator : public Iterator {
 public:
  TakeIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input)
      : left_(args.node->count - Delivered(args)), per_row_(!args.node->batched), input_(std::move(input)) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    if (left_ <= 0) {
      *end = true;
      return absl::OkStatus();
    }
    SLUICE_RETURN_IF_ERROR(input_->GetNext(out, end));
    if (*end) return absl::OkStatus();
    if (!per_row_) {
      --left_;
    } else {
      if (out->rows > left_) *out = out->Slice(0, left_);
      left_ -= out->rows;
    }
    return absl::OkStatus();
  }

 private:
  int64_t left_;
  const bool per_row_;
  std::unique_ptr<Iterator> input_;
};

}  // namespace

std::unique_ptr<Iterator> MakeTakeIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<TakeIterator>(args, std::move(input));
}

}  // namespace sluice::exec
