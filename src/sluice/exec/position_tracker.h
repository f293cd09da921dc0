// Follows where an epoch stands as the pipeline's iterator delivers its
// elements, for a saved state (exec/resume.h). Nodes run ahead of delivery,
// so the position is read off the last delivered row: its origin, where
// the shuffle's log says the shuffle stood after emitting it, and which of
// the repeat's epochs its row number falls in. Unordered, rows are not
// delivered in order: every delivered row goes into the ledger.
#ifndef SLUICE_EXEC_POSITION_TRACKER_H_
#define SLUICE_EXEC_POSITION_TRACKER_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "sluice/core/batch.h"
#include "sluice/exec/epoch_progress.h"
#include "sluice/exec/exec_context.h"

namespace sluice::exec {

// What the pipeline's iterator tells as it delivers elements, and asks for
// a saved state. Thread-compatible: the consumer's thread calls it.
class ElementTracker {
 public:
  virtual ~ElementTracker() = default;
  // Moves past `element` (a batch, or one sample).
  virtual absl::Status Delivered(const Batch& element) = 0;
  virtual EpochPosition Position() const = 0;
};

class PositionTracker : public ElementTracker {
 public:
  // `start`: where delivery starts (an epoch's start, or a resumed
  // position). REQUIRES: ctx->orders is set, and ctx->shuffle_log and
  // ctx->repeat_seams when the pipeline shuffles and repeats; `ctx`
  // outlives this.
  PositionTracker(ExecContext* ctx, bool repeats, EpochPosition start);

  // Moves past `element` (a batch, or one sample). FailedPrecondition when
  // its last row's origin is unknown or not where the epoch's splits say.
  absl::Status Delivered(const Batch& element) override;
  // Unordered mode (ctx->ledger set): with what is done as of now.
  EpochPosition Position() const override;

 private:
  // The number of the epoch the position is in (a repeat's, inside one).
  uint64_t epoch() const { return repeats_ ? RepeatEpoch(p_.epoch, p_.repeat) : p_.epoch; }

  ExecContext* const ctx_;
  const bool repeats_;
  EpochPosition p_;
  std::shared_ptr<const std::vector<io::Split>> order_;  // of epoch()
};

// A sharded pipeline delivers one element per global batch (the shard's
// part of it): its position is what the shard node logged for that global
// batch (shard_log.h). REQUIRES: ctx->shard_log is set; `ctx` outlives this.
class ShardTracker : public ElementTracker {
 public:
  // `start`: where delivery starts (an epoch's start, or a resumed one).
  ShardTracker(ExecContext* ctx, EpochPosition start) : ctx_(ctx), p_(std::move(start)) {}
  // FailedPrecondition when the shard node logged no position for it.
  absl::Status Delivered(const Batch& element) override;
  EpochPosition Position() const override { return p_; }

 private:
  ExecContext* const ctx_;
  EpochPosition p_;
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_POSITION_TRACKER_H_
