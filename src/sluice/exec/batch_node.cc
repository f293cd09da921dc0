// Batch node: cuts the input rows into batches of `size`. When an input
// chunk already is a whole batch (the source cuts chunks of the batch size
// whenever nothing in between changes row counts) it passes through with no
// copy; otherwise rows are copied into a new batch. The same cutting keeps
// a repeat's chunks whole across its epochs (MakeRechunkIterator).
#include <deque>

#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/row_copier.h"

namespace sluice::exec {
namespace {

class BatchIterator : public Iterator {
 public:
  BatchIterator(ExecContext* ctx, BufferPool* pool, const Schema& schema, int64_t size, bool drop_remainder,
                std::unique_ptr<Iterator> input)
      : ctx_(ctx),
        pool_(pool),
        schema_(schema),
        size_(size),
        drop_remainder_(drop_remainder),
        input_(std::move(input)) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    const int64_t size = size_;
    while (!input_end_ && pending_rows_ < size) {
      Batch chunk;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&chunk, &input_end_));
      if (input_end_ || chunk.rows == 0) continue;
      pending_rows_ += chunk.rows;
      pending_.push_back(std::move(chunk));
    }
    int64_t take = std::min(size, pending_rows_);
    if (take == 0 || (take < size && drop_remainder_)) {
      pending_.clear();
      pending_rows_ = 0;
      *end = true;
      return absl::OkStatus();
    }
    *end = false;
    pending_rows_ -= take;
    Batch& front = pending_.front();
    if (front.rows >= take) {  // zero-copy: the batch is (a slice of) one chunk
      *out = front.rows == take ? std::move(front) : front.Slice(0, take);
      if (front.rows == take) {
        pending_.pop_front();
      } else {
        front = front.Slice(take, front.rows);
      }
      return absl::OkStatus();
    }
    CpuToken token(&ctx_->cpu);
    if (!token.held()) return absl::CancelledError("pipeline cancelled");
    RowCopier copier(schema_, take, pool_);
    while (take > 0) {
      Batch& chunk = pending_.front();
      const int64_t n = std::min(take, chunk.rows);
      copier.Append(chunk, 0, n);
      take -= n;
      if (n == chunk.rows) {
        pending_.pop_front();
      } else {
        chunk = chunk.Slice(n, chunk.rows);
      }
    }
    *out = copier.Finish();
    return absl::OkStatus();
  }

 private:
  ExecContext* ctx_;
  BufferPool* pool_;
  const Schema& schema_;
  const int64_t size_;
  const bool drop_remainder_;
  std::unique_ptr<Iterator> input_;
  bool input_end_ = false;
  std::deque<Batch> pending_;
  int64_t pending_rows_ = 0;
};

}  // namespace

std::unique_ptr<Iterator> MakeBatchIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<BatchIterator>(args.ctx, args.output_pool(), args.node->output_schema, args.node->count,
                                         args.node->drop_remainder, std::move(input));
}

std::unique_ptr<Iterator> MakeRechunkIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<BatchIterator>(args.ctx, args.output_pool(), args.node->output_schema, args.chunk_rows,
                                         /*drop_remainder=*/false, std::move(input));
}

}  // namespace sluice::exec
