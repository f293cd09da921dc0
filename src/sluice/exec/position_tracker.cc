#include "sluice/exec/position_tracker.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::exec {
namespace {

// The split of `order`, from `from` on, that holds `row`; -1 when none.
int64_t FindSplit(const std::vector<io::Split>& order, const RowOrigin& row, int64_t from) {
  for (size_t s = static_cast<size_t>(from); s < order.size(); ++s) {
    const io::Split& split = order[s];
    if (split.file == row.file && row.record >= split.begin_record &&
        (split.end_record < 0 || row.record < split.end_record)) {
      return static_cast<int64_t>(s);
    }
  }
  return -1;
}

}  // namespace

PositionTracker::PositionTracker(ExecContext* ctx, bool repeats, EpochPosition start)
    : ctx_(ctx), repeats_(repeats), p_(std::move(start)), order_(ctx->orders->Get(epoch())) {}

EpochPosition PositionTracker::Position() const {
  EpochPosition p = p_;
  if (ctx_->ledger != nullptr) p.done = ctx_->ledger->Snapshot();
  return p;
}

absl::Status PositionTracker::Delivered(const Batch& element) {
  if (element.rows == 0) return absl::OkStatus();
  if (ctx_->ledger != nullptr) {
    ++p_.elements;
    p_.rows += element.rows;
    return ctx_->ledger->Done(element.provenance, 0, element.rows);
  }
  const RowOrigin last = element.provenance.ReadThrough(element.rows);
  if (last.file < 0) return absl::FailedPreconditionError("the last element's rows have no known origin");
  if (repeats_) {
    const std::optional<int64_t> repeat = ctx_->repeat_seams->Find(p_.rows + element.rows - 1);
    if (!repeat) return absl::FailedPreconditionError("the repeat did not log the epoch of the element");
    if (*repeat != p_.repeat) {  // into the repeat's next epoch
      p_.repeat = *repeat;
      p_.split = 0;
      p_.record = 0;
      if (p_.shuffle) p_.shuffle = ShufflePosition{};
      order_ = ctx_->orders->Get(epoch());
    }
  }
  // The next row the input must read: after the last delivered, or through
  // a shuffle the oldest its buffer held.
  RowOrigin next = last;
  bool inclusive = false;
  if (p_.shuffle) {
    const std::optional<ShuffleMark> mark =
        ctx_->shuffle_log->Take(epoch(), element.provenance.SampleId(element.rows - 1));
    if (!mark) {
      return absl::FailedPreconditionError(
          absl::StrCat("record ", last.record, " of file ", last.file, " was delivered but not logged by the shuffle"));
    }
    p_.shuffle = mark->position;
    next = mark->oldest_origin;
    inclusive = true;
  }
  ++p_.elements;
  p_.rows += element.rows;
  if (next.file < 0) {  // the buffer was empty: the epoch's rows are all drawn
    p_.split = static_cast<int64_t>(order_->size());
    p_.record = 0;
    return absl::OkStatus();
  }
  const int64_t split = FindSplit(*order_, next, p_.split);
  if (split < 0) {
    return absl::FailedPreconditionError(absl::StrCat("record ", next.record, " of file ", next.file,
                                                      " lies in none of the epoch's splits from ", p_.split, " on"));
  }
  p_.split = split;
  p_.record = inclusive ? next.record : next.record + 1;
  return absl::OkStatus();
}

absl::Status ShardTracker::Delivered(const Batch& element) {
  const int64_t global_batches = (p_.shard ? p_.shard->global_batches : 0) + 1;
  std::optional<EpochPosition> p = ctx_->shard_log->Take(global_batches);
  if (!p) {
    return absl::FailedPreconditionError(
        absl::StrCat("the shard node logged no position for global batch ", global_batches));
  }
  const int64_t elements = p_.elements + 1, rows = p_.rows + element.rows;
  p_ = *std::move(p);
  p_.elements = elements;
  p_.rows = rows;
  return absl::OkStatus();
}

}  // namespace sluice::exec
