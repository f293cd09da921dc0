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
#include "sluice/exec/epoch_progress.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/io/file_split.h"

namespace sluice::exec {

// OK when `compiled` can save and restore its position: ordered, one
// source, at most one shuffle (of rows, after only maps and filters), at
// most one repeat, takes after which no row is dropped (and none inside the
// repeat), no row dropped after the repeat; a remote input (first) counts
// as unordered, and the input itself must agree (RemoteInput::
// CheckResumable). Unimplemented naming the node otherwise.
absl::Status CheckResumable(const graph::CompiledPipeline& compiled);

// Whether a resumed source can hand the shuffle only the rows its buffer
// held, passing over the others (RowSelection): every row between them is
// one of the shuffle's (maps and prefetches only, no corrupt record
// skipped), and the source starts splits at a record and reads them one at
// a time.
bool SourceSelectsForShuffle(const graph::CompiledPipeline& compiled);

// Whether the pipeline has a node of `kind`.
bool Has(const graph::CompiledPipeline& compiled, graph::NodeKind kind);

// The state as bytes (an IteratorState message), and back. ParseState
// fails with InvalidArgument naming what does not match: not a state
// (truncated or other bytes), another format version, another pipeline
// (its fingerprint), another listing of the source's files (when both
// the state and the caller have one: ListingOf), a split beyond the
// epoch's.
std::string SerializeState(const std::string& fingerprint, const EpochPosition& p, const std::string& listing = "");
absl::StatusOr<EpochPosition> ParseState(const std::string& bytes, const std::string& fingerprint,
                                         const std::string& listing = "");
// What a source listed: its files and splits, counted and digested
// (FNV-1a over the names, record ranges and `extra`, the source's
// ListingExtra: the same in every process).
std::string ListingOf(const std::vector<std::string>& files, const std::vector<io::Split>& splits,
                      const std::string& extra = "");
// The epoch a state was saved in, read before any check (a front that
// counts epochs goes on after it); nullopt for bytes that are no state.
std::optional<uint64_t> StateEpoch(const std::string& bytes);
// The shards of the pipeline that saved a state (0: it had no shard node),
// read before any check; nullopt for bytes that are no state.
std::optional<int> StateShards(const std::string& bytes);

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_RESUME_H_
