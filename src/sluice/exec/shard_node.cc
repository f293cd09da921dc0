// Shard node: this shard's part of every global batch (ShardDef). The
// input's rows are counted from the epoch's start (or the resumed global
// batch) and cut into global batches of num_shards x batch rows; rows
// [index * batch, (index + 1) * batch) of each are handed on as one element
// once the global batch is whole, so every shard yields one element per
// global batch. A last global batch short of rows is left out (uneven
// "drop") or filled by repeating its own rows (uneven "pad", the fill
// marked 1 in "is_padding"): they are read again in a resumed epoch, where
// the epoch's first rows are not. The one shard of a one-rank job keeps it
// when the batch after it would (ShardSpec::keep_short).
#include <algorithm>
#include <optional>
#include <vector>

#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/position_tracker.h"
#include "sluice/exec/row_copier.h"
#include "sluice/exec/shard_log.h"

namespace sluice::exec {
namespace {

class ShardIterator : public Iterator {
 public:
  ShardIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input)
      : ctx_(args.ctx),
        node_(*args.node),
        spec_(args.node->shard),
        pool_(args.output_pool()),
        input_(std::move(input)) {
    const EpochPosition* resumed = ctx_->ResumeOf(args.epoch);
    if (resumed != nullptr && resumed->shard) before_ = resumed->shard->global_batches;
    if (ctx_->shard_log != nullptr) {
      EpochPosition start;
      start.epoch = args.epoch;
      if (ctx_->shuffle_log != nullptr) start.shuffle = ShufflePosition{};
      tracker_.emplace(ctx_, /*repeats=*/false, resumed != nullptr ? *resumed : start);
    }
    part_.emplace(node_.input_schema, spec_.batch, pool_);
  }

  absl::Status GetNext(Batch* out, bool* end) override {
    while (!ended_) {
      if (row_ == chunk_.rows) {
        bool input_end = false;
        SLUICE_RETURN_IF_ERROR(input_->GetNext(&chunk_, &input_end));
        row_ = 0;
        if (input_end) return Finish(out, end);
        if (chunk_.rows == 0) continue;
        last_ = chunk_.Slice(chunk_.rows - 1, chunk_.rows);
      }
      if (Advance()) {
        *end = false;
        return Emit(out);
      }
    }
    *end = true;
    return absl::OkStatus();
  }

 private:
  // Takes the next run of the chunk: others' rows, or this shard's; true
  // when it ends a global batch.
  bool Advance() {
    const int64_t lo = spec_.index * spec_.batch, hi = lo + spec_.batch, global = spec_.global_batch();
    const int64_t left = chunk_.rows - row_;
    const int64_t run = pos_ < lo   ? std::min(left, lo - pos_)
                        : pos_ < hi ? std::min(left, hi - pos_)
                                    : std::min(left, global - pos_);
    if (pos_ >= lo && pos_ < hi) part_->Append(chunk_, row_, row_ + run);
    if (spec_.pad) in_progress_.push_back(chunk_.Slice(row_, row_ + run));
    pos_ += run;
    row_ += run;
    rows_ += run;
    if (pos_ < global) return false;
    pos_ = 0;
    in_progress_.clear();
    ++done_;
    Log(chunk_.Slice(row_ - 1, row_));
    return true;
  }

  // This shard's part of the global batch just completed.
  absl::Status Emit(Batch* out) {
    *out = part_->Finish();
    part_.emplace(node_.input_schema, spec_.batch, pool_);
    if (spec_.pad) AddPaddingColumn(out, out->rows);
    return absl::OkStatus();
  }

  // The input ended: the last, short global batch is left out, padded or
  // (one shard) kept.
  absl::Status Finish(Batch* out, bool* end) {
    ended_ = true;
    *end = true;
    SLUICE_RETURN_IF_ERROR(CheckEnough());
    if (pos_ == 0 || !(spec_.pad || spec_.keep_short)) return absl::OkStatus();
    if (spec_.keep_short) {
      *out = part_->Finish();
      ++done_;
      Log(last_);
      *end = false;
      return absl::OkStatus();
    }
    // Positions [pos_, global) are the short batch's rows [0, pos_) again,
    // in order, as often as it takes.
    const int64_t lo = spec_.index * spec_.batch, hi = lo + spec_.batch;
    const int64_t real = part_->rows();
    for (int64_t q = std::max(lo, pos_); q < hi; ++q) AppendInProgressRow((q - pos_) % pos_);
    *out = part_->Finish();
    AddPaddingColumn(out, real);
    ++done_;
    Log(last_);
    *end = false;
    return absl::OkStatus();
  }

  // Row `j` of the global batch in progress onto this shard's part.
  void AppendInProgressRow(int64_t j) {
    for (const Batch& run : in_progress_) {
      if (j < run.rows) {
        part_->Append(run, j, j + 1);
        return;
      }
      j -= run.rows;
    }
  }

  // Every shard needs rows of its own, and a shard that drops the last
  // global batch needs one whole.
  absl::Status CheckEnough() const { return spec_.CheckRows(node_.name, before_ * spec_.global_batch() + rows_); }

  // Appends "is_padding": 0 for the first `real` rows, 1 after them.
  void AddPaddingColumn(Batch* b, int64_t real) const {
    Column padding;
    padding.values = Tensor::Allocate(DType::kUInt8, Shape{b->rows}, pool_);
    uint8_t* v = padding.values.data<uint8_t>();
    std::fill(v, v + real, 0);
    std::fill(v + real, v + b->rows, 1);
    b->columns.push_back(std::move(padding));
  }

  // Where the stream at this node stands after `last`, the last row of the
  // global batch just done (or of the epoch), for the consumer's state.
  void Log(const Batch& last) {
    if (!tracker_ || !position_.ok()) return;
    position_ = tracker_->Delivered(last);
    if (!position_.ok()) return;
    EpochPosition p = tracker_->Position();
    p.shard = EpochPosition::Sharded{before_ + done_, spec_.global_batch(), spec_.num_shards, spec_.pad};
    ctx_->shard_log->Add(before_ + done_, std::move(p));
  }

  ExecContext* const ctx_;
  const graph::CompiledNode& node_;
  const graph::ShardSpec spec_;
  BufferPool* const pool_;
  std::unique_ptr<Iterator> input_;
  std::optional<PositionTracker> tracker_;  // when the pipeline tracks its position
  absl::Status position_;                   // the tracker's; lost stays lost
  std::optional<RowCopier> part_;           // this shard's rows of the global batch in progress
  std::vector<Batch> in_progress_;          // uneven "pad": the global batch in progress, views of its runs
  Batch chunk_;                             // the input's, being cut
  Batch last_;                              // the last row read
  int64_t row_ = 0;                         // in chunk_
  int64_t pos_ = 0;                         // in the global batch in progress
  int64_t rows_ = 0;                        // read this run
  int64_t before_ = 0;                      // global batches done before a resumed run
  int64_t done_ = 0;                        // global batches done this run
  bool ended_ = false;
};

}  // namespace

std::unique_ptr<Iterator> MakeShardIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input) {
  return std::make_unique<ShardIterator>(args, std::move(input));
}

}  // namespace sluice::exec
