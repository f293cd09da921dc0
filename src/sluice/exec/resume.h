// Saving where an epoch stands, and going on from there in a new iterator
// (another process, another thread count): exactly the elements the
// uninterrupted run would have yielded next, with the same random draws
// (they are keyed by each sample's identity, not by its position).
//
// The state is a position, not samples: in ordered mode every element
// before the last one delivered came from earlier in the epoch's split
// order, so "the record after the last delivered one" says what remains;
// rows filtered out after it are read and filtered again. Through a
// shuffle, the position is the shuffle's (shuffle_state.h) and the record
// is the oldest one its buffer held, where the resumed input starts.
#ifndef SLUICE_EXEC_RESUME_H_
#define SLUICE_EXEC_RESUME_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/core/batch.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/exec/shuffle_state.h"
#include "sluice/io/file_split.h"

namespace sluice::exec {

struct EpochPosition {
  uint64_t epoch = 0;
  // The next record to deliver is `record` (in its file's numbering) of
  // split `split` of the epoch's split order.
  int64_t split = 0;
  int64_t record = 0;
  int64_t elements = 0;  // delivered this epoch
  int64_t rows = 0;      // delivered this epoch
  // Set when the pipeline shuffles; then split and record name the oldest
  // row the buffer held.
  std::optional<ShufflePosition> shuffle;
};

// OK when `compiled` can save and restore its position: ordered, one
// source, at most one shuffle (of rows, after only maps and filters), takes
// after which no row is dropped, and no repeat or remote input;
// Unimplemented naming the node otherwise.
absl::Status CheckResumable(const graph::CompiledPipeline& compiled);

// Whether the pipeline has a shuffle node.
bool Shuffles(const graph::CompiledPipeline& compiled);

// The order in which the source reads its splits in epoch `epoch`.
std::vector<io::Split> EpochSplitOrder(const graph::CompiledNode& source, uint64_t seed, uint64_t epoch);

// Moves `p` past `element` (a batch, or one sample), whose last row is the
// last delivered; through a shuffle, to where `log` says the shuffle stood
// after emitting that row (null: no shuffle). FailedPrecondition when that
// row's origin is unknown or lies in no split of `order` from p->split on.
absl::Status Advance(const std::vector<io::Split>& order, const Batch& element, ShuffleLog* log,
                     EpochPosition* p);

// The state as bytes (an IteratorState message), and back. ParseState
// fails with InvalidArgument naming what does not match: not a state
// (truncated or other bytes), another format version, another pipeline
// (its fingerprint), a split beyond the epoch's.
std::string SerializeState(const std::string& fingerprint, const EpochPosition& p);
absl::StatusOr<EpochPosition> ParseState(const std::string& bytes, const std::string& fingerprint);

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_RESUME_H_
