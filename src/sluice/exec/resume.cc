#include "sluice/exec/resume.h"

#include "absl/strings/str_cat.h"
#include "pipeline.pb.h"
#include "sluice/core/rng.h"
#include "sluice/version.h"

namespace sluice::exec {
namespace {

constexpr char kMagic[] = "sluice-iterator-state";
constexpr uint32_t kFormatVersion = 1;

// Whether a row can be dropped after node `i`: by a filter, or by a map
// under on_corrupt "skip".
bool DropsRowsAfter(const graph::CompiledPipeline& compiled, size_t i) {
  const bool skip_corrupt = compiled.nodes.front().skip_corrupt;
  for (size_t j = i + 1; j < compiled.nodes.size(); ++j) {
    const graph::NodeKind kind = compiled.nodes[j].kind;
    if (kind == graph::NodeKind::kFilter || (kind == graph::NodeKind::kMap && skip_corrupt)) return true;
  }
  return false;
}

absl::Status Refuse(const graph::CompiledNode& node, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("node '", node.name, "': ", why));
}

}  // namespace

absl::Status CheckResumable(const graph::CompiledPipeline& compiled) {
  if (!compiled.ordered) {
    return absl::UnimplementedError("an unordered pipeline's position cannot be saved (run it ordered to checkpoint)");
  }
  if (compiled.nodes.empty() || compiled.nodes.front().kind != graph::NodeKind::kSource) {
    return absl::UnimplementedError("only a pipeline that starts at its source can save its position");
  }
  bool rows_in_file_order = true;  // only sources, maps, filters and prefetches so far
  bool shuffled = false;
  for (size_t i = 0; i < compiled.nodes.size(); ++i) {
    const graph::CompiledNode& node = compiled.nodes[i];
    switch (node.kind) {
      case graph::NodeKind::kSource:
      case graph::NodeKind::kMap:
      case graph::NodeKind::kFilter:
      case graph::NodeKind::kPrefetch:
        break;
      case graph::NodeKind::kBatch:
        rows_in_file_order = false;
        break;
      case graph::NodeKind::kShuffle:
        if (shuffled) return Refuse(node, "the position of a pipeline with two shuffles cannot be saved");
        if (!rows_in_file_order) {
          return Refuse(node, "a shuffle after a batch or a take cannot save its position (shuffle rows before them)");
        }
        shuffled = true;
        break;
      case graph::NodeKind::kTake:
        rows_in_file_order = false;
        if (DropsRowsAfter(compiled, i)) {
          return Refuse(node, "a take followed by a filter (or a map under on_corrupt \"skip\") cannot save its "
                              "count; take after the filter");
        }
        break;
      case graph::NodeKind::kRepeat:
        return Refuse(node, "a position inside a repeat cannot be saved yet (iterate the epochs instead: "
                            "pipe.iterate(epoch))");
      case graph::NodeKind::kRemote:
        return Refuse(node, "a distributed pipeline's position cannot be saved yet");
    }
  }
  return absl::OkStatus();
}

bool Shuffles(const graph::CompiledPipeline& compiled) {
  for (const graph::CompiledNode& node : compiled.nodes) {
    if (node.kind == graph::NodeKind::kShuffle) return true;
  }
  return false;
}

std::vector<io::Split> EpochSplitOrder(const graph::CompiledNode& source, uint64_t seed, uint64_t epoch) {
  std::vector<io::Split> splits = source.format->MakeSplits();
  if (source.shuffle_splits) {  // Fisher-Yates keyed by (seed, node, epoch)
    SampleRng rng(seed, OpKey(source.name, 0), epoch, 0);
    for (size_t i = splits.size(); i > 1; --i) std::swap(splits[i - 1], splits[rng.NextU32() % i]);
  }
  return splits;
}

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

absl::Status Advance(const std::vector<io::Split>& order, const Batch& element, ShuffleLog* log,
                     EpochPosition* p) {
  if (element.rows == 0) return absl::OkStatus();
  const RowOrigin last = element.provenance.Origin(element.rows - 1);
  if (last.file < 0) return absl::FailedPreconditionError("the last element's rows have no known origin");
  // The next row the input must read: after the last delivered, or through
  // a shuffle the oldest its buffer held.
  RowOrigin next = last;
  bool inclusive = false;
  if (log != nullptr) {
    const std::optional<ShuffleMark> mark = log->Take(element.provenance.SampleId(element.rows - 1));
    if (!mark) {
      return absl::FailedPreconditionError(absl::StrCat("record ", last.record, " of file ", last.file,
                                                        " was delivered but not logged by the shuffle"));
    }
    p->shuffle = mark->position;
    next = mark->oldest_origin;
    inclusive = true;
  }
  ++p->elements;
  p->rows += element.rows;
  if (next.file < 0) {  // the buffer was empty: the epoch's rows are all drawn
    p->split = static_cast<int64_t>(order.size());
    p->record = 0;
    return absl::OkStatus();
  }
  const int64_t split = FindSplit(order, next, p->split);
  if (split < 0) {
    return absl::FailedPreconditionError(absl::StrCat("record ", next.record, " of file ", next.file,
                                                      " lies in none of the epoch's splits from ", p->split, " on"));
  }
  p->split = split;
  p->record = inclusive ? next.record : next.record + 1;
  return absl::OkStatus();
}

std::string SerializeState(const std::string& fingerprint, const EpochPosition& p) {
  IteratorState state;
  state.set_magic(kMagic);
  state.set_format_version(kFormatVersion);
  state.set_sluice_version(SLUICE_VERSION_STRING);
  state.set_pipeline_fingerprint(fingerprint);
  state.set_epoch(p.epoch);
  state.set_split(p.split);
  state.set_record(p.record);
  state.set_elements(p.elements);
  state.set_rows(p.rows);
  if (p.shuffle) {
    ShuffleState* shuffle = state.mutable_shuffle();
    shuffle->set_emitted(p.shuffle->emitted);
    shuffle->set_oldest(p.shuffle->oldest);
    shuffle->set_input_rows(p.shuffle->input_rows);
  }
  return state.SerializeAsString();
}

absl::StatusOr<EpochPosition> ParseState(const std::string& bytes, const std::string& fingerprint) {
  IteratorState state;
  if (!state.ParseFromString(bytes) || state.magic() != kMagic) {
    return absl::InvalidArgumentError(absl::StrCat("not a sluice iterator state (", bytes.size(),
                                                   " bytes; truncated, or other data)"));
  }
  if (state.format_version() != kFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat("the state's format_version is ", state.format_version(),
                                                   " (saved by sluice ", state.sluice_version(), "); this sluice (",
                                                   SLUICE_VERSION_STRING, ") reads ", kFormatVersion));
  }
  if (state.pipeline_fingerprint() != fingerprint) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the state is another pipeline's: its pipeline_fingerprint is ", state.pipeline_fingerprint(),
        ", this pipeline's ", fingerprint, " (a change to the source, an op, an attr or the seed changes it)"));
  }
  if (state.split() < 0 || state.record() < 0 || state.elements() < 0 || state.rows() < 0) {
    return absl::InvalidArgumentError("the state's split, record, elements and rows must be >= 0");
  }
  EpochPosition p{state.epoch(), state.split(), state.record(), state.elements(), state.rows(), std::nullopt};
  if (state.has_shuffle()) {
    const ShuffleState& shuffle = state.shuffle();
    if (shuffle.emitted() < 0 || shuffle.oldest() < 0 || shuffle.input_rows() < -1) {
      return absl::InvalidArgumentError("the state's shuffle emitted and oldest must be >= 0, input_rows >= -1");
    }
    p.shuffle = ShufflePosition{shuffle.emitted(), shuffle.oldest(), shuffle.input_rows()};
  }
  return p;
}

}  // namespace sluice::exec
