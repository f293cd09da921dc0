#include "sluice/exec/resume.h"

#include "absl/strings/str_cat.h"
#include "pipeline.pb.h"
#include "sluice/core/rng.h"
#include "sluice/version.h"

namespace sluice::exec {
namespace {

constexpr char kMagic[] = "sluice-iterator-state";
constexpr uint32_t kFormatVersion = 1;

}  // namespace

absl::Status CheckResumable(const graph::CompiledPipeline& compiled) {
  if (!compiled.ordered) {
    return absl::UnimplementedError("an unordered pipeline's position cannot be saved (run it ordered to checkpoint)");
  }
  if (compiled.nodes.empty() || compiled.nodes.front().kind != graph::NodeKind::kSource) {
    return absl::UnimplementedError("only a pipeline that starts at its source can save its position");
  }
  for (const graph::CompiledNode& node : compiled.nodes) {
    switch (node.kind) {
      case graph::NodeKind::kSource:
      case graph::NodeKind::kMap:
      case graph::NodeKind::kFilter:
      case graph::NodeKind::kBatch:
      case graph::NodeKind::kPrefetch:
        break;
      default:
        return absl::UnimplementedError(absl::StrCat("node '", node.name,
                                                     "': saving the position of a pipeline with this kind of node "
                                                     "(shuffle, repeat, take, distribute) is not supported yet"));
    }
  }
  return absl::OkStatus();
}

std::vector<io::Split> EpochSplitOrder(const graph::CompiledNode& source, uint64_t seed, uint64_t epoch) {
  std::vector<io::Split> splits = source.format->MakeSplits();
  if (source.shuffle_splits) {  // Fisher-Yates keyed by (seed, node, epoch)
    SampleRng rng(seed, OpKey(source.name, 0), epoch, 0);
    for (size_t i = splits.size(); i > 1; --i) std::swap(splits[i - 1], splits[rng.NextU32() % i]);
  }
  return splits;
}

absl::Status Advance(const std::vector<io::Split>& order, const Batch& element, EpochPosition* p) {
  if (element.rows == 0) return absl::OkStatus();
  const RowOrigin last = element.provenance.Origin(element.rows - 1);
  if (last.file < 0) return absl::FailedPreconditionError("the last element's rows have no known origin");
  for (size_t s = static_cast<size_t>(p->split); s < order.size(); ++s) {
    const io::Split& split = order[s];
    const bool inside = split.file == last.file && last.record >= split.begin_record &&
                        (split.end_record < 0 || last.record < split.end_record);
    if (!inside) continue;
    p->split = static_cast<int64_t>(s);
    p->record = last.record + 1;
    ++p->elements;
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat("record ", last.record, " of file ", last.file,
                                                    " lies in none of the epoch's splits from ", p->split, " on"));
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
  if (state.split() < 0 || state.record() < 0 || state.elements() < 0) {
    return absl::InvalidArgumentError("the state's split, record and elements must be >= 0");
  }
  return EpochPosition{state.epoch(), state.split(), state.record(), state.elements()};
}

}  // namespace sluice::exec
