// Batch node: cuts the input rows into batches of `size`. When an input
// chunk holds a whole batch (the source cuts chunks of the batch size
// whenever nothing in between changes row counts) the batch is a view of
// it, no copy. Smaller chunks are copied into the batch as they arrive, not
// held until it fills: a chunk may view memory its producer needs back (a
// service worker's shared-memory ring, where a batch of single images
// would not fit). The same cutting keeps a repeat's chunks whole across its
// epochs (MakeRechunkIterator). After a shard, each of the shard's elements
// is one batch (ShardBatchIterator).
#include <algorithm>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/row_copier.h"

namespace sluice::exec {
namespace {

class BatchIterator : public Iterator {
 public:
  BatchIterator(std::string name, ExecContext* ctx, BufferPool* pool, const Schema& schema, int64_t size,
                bool drop_remainder, std::unique_ptr<Iterator> input)
      : name_(std::move(name)),
        ctx_(ctx),
        pool_(pool),
        schema_(schema),
        size_(size),
        drop_remainder_(drop_remainder),
        input_(std::move(input)) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    *end = false;
    while (true) {
      if (!filling_ && rest_.rows >= size_) {  // zero-copy: (a slice of) one chunk
        TakeWhole(out);
        return absl::OkStatus();
      }
      if (rest_.rows > 0) {
        SLUICE_RETURN_IF_ERROR(CopyRest());
        if (filling_->rows() == size_) {
          *out = filling_->Finish();
          filling_.reset();
          return absl::OkStatus();
        }
        continue;
      }
      if (input_end_) break;
      input_->LimitNextRows(size_ - (filling_ ? filling_->rows() : 0));
      Batch chunk;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&chunk, &input_end_));
      if (!input_end_) rest_ = std::move(chunk);
    }
    const bool remainder = filling_ && filling_->rows() > 0 && !drop_remainder_;
    if (remainder) *out = filling_->Finish();
    filling_.reset();
    *end = !remainder;
    return absl::OkStatus();
  }

 private:
  void TakeWhole(Batch* out) {
    if (rest_.rows == size_) {
      *out = std::move(rest_);
      rest_ = Batch();
    } else {
      *out = rest_.Slice(0, size_);
      rest_ = rest_.Slice(size_, rest_.rows);
    }
  }

  // Copies what of rest_ the batch being filled has room for.
  absl::Status CopyRest() {
    CpuToken token(&ctx_->cpu);
    if (!token.held()) return absl::CancelledError("pipeline cancelled");
    if (!filling_ && BatchBuilder::ExtendsInPlace(rest_, size_, pool_->kind())) {
      // A chunk cut short (a split's end, large records) whose blocks have room for the
      // batch: the rest is copied in after its rows, and no batch more is
      // held while it is.
      filling_.emplace(schema_, size_, std::move(rest_));
      rest_ = Batch();
      return absl::OkStatus();
    }
    if (!filling_) SLUICE_RETURN_IF_ERROR(StartFilling());
    const int64_t n = std::min(rest_.rows, size_ - filling_->rows());
    filling_->Append(rest_, 0, n);
    rest_ = n == rest_.rows ? Batch() : rest_.Slice(n, rest_.rows);
    return absl::OkStatus();
  }

  // An empty batch of size_ rows, or ResourceExhausted where its memory
  // cannot be had (batch(2**40) asked for 8 TiB: std::bad_alloc).
  absl::Status StartFilling() {
    // Its bytes past int64 (batch(2**62)) would wrap to a small block the
    // rows then overrun. A ragged column's offsets take 8 bytes a row, and
    // its values start at 64 (BatchBuilder).
    if (size_ <= std::numeric_limits<int64_t>::max() / (schema_.RowBytes() + 72)) {
      try {
        filling_.emplace(schema_, size_, pool_);
        return absl::OkStatus();
      } catch (const std::bad_alloc&) {  // said below
      }
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("node '", name_, "': cannot allocate a batch of ", size_, " rows of ", schema_.RowBytes(),
                     " bytes each: more memory than this process can have; use a smaller batch size"));
  }

  const std::string name_;
  ExecContext* ctx_;
  BufferPool* pool_;
  const Schema& schema_;
  const int64_t size_;
  const bool drop_remainder_;
  std::unique_ptr<Iterator> input_;
  bool input_end_ = false;
  Batch rest_;                        // input rows not yet in a batch
  std::optional<RowCopier> filling_;  // the batch being copied together
};

// A shard hands on its part of each global batch as one element of the
// batch size. A map after it that skips corrupt rows (on_corrupt "skip")
// shortens that element: it stays one batch, short, rather than borrowing
// rows of the next, so that every shard still yields one batch per global
// batch (a rank a batch behind the others would hang them in an
// all-reduce at the epoch's end).
class ShardBatchIterator : public Iterator {
 public:
  ShardBatchIterator(const graph::CompiledNode& node, std::unique_ptr<Iterator> input)
      : node_(node), input_(std::move(input)) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    SLUICE_RETURN_IF_ERROR(input_->GetNext(out, end));
    if (*end) return absl::OkStatus();
    ++batches_;
    if (out->rows > 0) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(
        "node '", node_.name, "': every row of this shard's part of its global batch ", batches_,
        " (this run's) was skipped as corrupt (on_corrupt \"skip\"), and a shard must yield one batch per global "
        "batch for the ranks to stay in step: use a larger batch per shard, or decode before the shard"));
  }

 private:
  const graph::CompiledNode& node_;
  std::unique_ptr<Iterator> input_;
  int64_t batches_ = 0;
};

}  // namespace

std::unique_ptr<Iterator> MakeBatchIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  if (args.node->per_shard_element) return std::make_unique<ShardBatchIterator>(*args.node, std::move(input));
  return std::make_unique<BatchIterator>(args.node->name, args.ctx, args.output_pool(), args.node->output_schema,
                                         args.node->count, args.node->drop_remainder, std::move(input));
}

std::unique_ptr<Iterator> MakeRechunkIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<BatchIterator>(args.node->name, args.ctx, args.output_pool(), args.node->output_schema,
                                         args.chunk_rows, /*drop_remainder=*/false, std::move(input));
}

}  // namespace sluice::exec
