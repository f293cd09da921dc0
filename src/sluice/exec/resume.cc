#include "sluice/exec/resume.h"

#include "absl/strings/str_cat.h"
#include "pipeline.pb.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/crc32c.h"
#include "sluice/version.h"

namespace sluice::exec {
namespace {

constexpr char kMagic[] = "sluice-iterator-state";
// 2: states end with a checksum (field 16, serialized last), so one cut
// short lacks it; 1: states saved before, read as they were.
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kUnsummedFormatVersion = 1;

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
  if (compiled.nodes.empty()) return absl::UnimplementedError("an empty pipeline has no position");
  // Rows from a service's workers arrive as they come: unordered.
  const bool remote = compiled.nodes.front().kind == graph::NodeKind::kRemote;
  const bool unordered = !compiled.ordered || remote;
  bool rows_in_file_order = true;  // only sources, maps, filters and prefetches so far
  bool shuffled = false;
  bool taken = false;
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
          return Refuse(node,
                        "a shuffle after a batch, a take or a repeat cannot save its position (shuffle rows "
                        "before them)");
        }
        shuffled = true;
        break;
      case graph::NodeKind::kTake:
        rows_in_file_order = false;
        taken = true;
        if (DropsRowsAfter(compiled, i)) {
          return Refuse(node,
                        "a take followed by a filter (or a map under on_corrupt \"skip\") cannot save its "
                        "count; take after the filter");
        }
        break;
      case graph::NodeKind::kRepeat:
        if (unordered) {
          return Refuse(node,
                        "an unordered pipeline's repeat mixes its epochs' rows: its position cannot be saved "
                        "(iterate the epochs instead, or run it ordered)");
        }
        if (taken) return Refuse(node, "a take inside a repeat cannot save its count (take after the repeat)");
        if (DropsRowsAfter(compiled, i)) {
          return Refuse(node,
                        "a repeat followed by a filter (or a map under on_corrupt \"skip\") cannot save "
                        "which of its epochs a row came from; filter before the repeat");
        }
        rows_in_file_order = false;
        break;
      case graph::NodeKind::kRemote:
        if (i != 0) return Refuse(node, "a remote input must come first");
        break;
      case graph::NodeKind::kShard:  // its own position (shard_log.h); compilation placed it
        break;
    }
  }
  return absl::OkStatus();
}

bool SourceSelectsForShuffle(const graph::CompiledPipeline& compiled) {
  const graph::CompiledNode& source = compiled.nodes.front();
  if (source.skip_corrupt || source.parallel_reads > 1 || !source.format->SeeksRecords()) return false;
  for (size_t i = 1; i < compiled.nodes.size(); ++i) {
    switch (compiled.nodes[i].kind) {
      case graph::NodeKind::kShuffle:
        return true;
      case graph::NodeKind::kMap:
      case graph::NodeKind::kPrefetch:
        break;
      default:
        return false;
    }
  }
  return false;
}

bool Has(const graph::CompiledPipeline& compiled, graph::NodeKind kind) {
  for (const graph::CompiledNode& node : compiled.nodes) {
    if (node.kind == kind) return true;
  }
  return false;
}

namespace {

absl::StatusOr<DoneRows> ParseDone(const DoneRowsState& state) {
  const auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("the state's done rows are malformed: ", what));
  };
  DoneRows done;
  done.splits_below = state.splits_below();
  if (done.splits_below < 0) return bad("splits_below < 0");
  for (int64_t split : state.splits()) {
    if (split <= (done.splits.empty() ? done.splits_below - 1 : done.splits.back())) {
      return bad("splits not ascending past splits_below");
    }
    done.splits.push_back(split);
  }
  for (const FileRecordRanges& f : state.records()) {
    if (f.file() < 0 || f.ranges_size() % 2 != 0 || done.records.count(f.file()) > 0) {
      return bad(absl::StrCat("the ranges of file ", f.file()));
    }
    auto& ranges = done.records[f.file()];
    for (int i = 0; i < f.ranges_size(); i += 2) {
      const int64_t begin = f.ranges(i), end = f.ranges(i + 1);
      if (begin < 0 || end <= begin || (!ranges.empty() && begin < ranges.back().second)) {
        return bad(absl::StrCat("the ranges of file ", f.file(), " are not ascending and disjoint"));
      }
      ranges.emplace_back(begin, end);
    }
  }
  return done;
}

}  // namespace

std::string ListingOf(const std::vector<std::string>& files, const std::vector<io::Split>& splits,
                      const std::string& extra) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ull;
  };
  for (const std::string& file : files) mix(file.c_str(), file.size() + 1);
  for (const io::Split& s : splits) {
    const int64_t fields[3] = {s.file, s.begin_record, s.end_record};
    mix(fields, sizeof(fields));
  }
  mix(extra.data(), extra.size());  // nothing for most sources: their states' listings as before
  return absl::StrCat(files.size(), " files, ", splits.size(), " splits, ", absl::Hex(h, absl::kZeroPad16));
}

namespace {

// The state's checksum against its fields as parsed: a changed byte
// parses to other fields, which serialize to other bytes.
absl::Status CheckSum(IteratorState state, size_t size) {
  if (!state.has_checksum()) {
    if (state.format_version() == kUnsummedFormatVersion) return absl::OkStatus();  // saved before states had one
    return absl::InvalidArgumentError(absl::StrCat(
        "not a sluice iterator state (", size, " bytes; truncated: it lacks the checksum a whole state ends with)"));
  }
  const uint32_t saved = state.checksum();
  state.clear_checksum();
  const std::string unsummed = state.SerializeAsString();
  if (io::Crc32c(unsummed.data(), unsummed.size()) == saved) return absl::OkStatus();
  return absl::DataLossError(
      "the iterator state is damaged: its checksum does not match its contents (changed "
      "on disk or in transit); resuming from it would deliver the wrong samples");
}

}  // namespace

std::string SerializeState(const std::string& fingerprint, const EpochPosition& p, const std::string& listing) {
  IteratorState state;
  state.set_listing(listing);
  state.set_magic(kMagic);
  state.set_format_version(kFormatVersion);
  state.set_sluice_version(SLUICE_VERSION_STRING);
  state.set_pipeline_fingerprint(fingerprint);
  state.set_epoch(p.epoch);
  state.set_repeat(p.repeat);
  state.set_split(p.split);
  state.set_record(p.record);
  state.set_elements(p.elements);
  state.set_rows(p.rows);
  if (!p.remote_job.empty()) {
    state.mutable_remote()->set_job(p.remote_job);
    state.mutable_remote()->set_client(p.remote_client);
  }
  if (p.done) {
    DoneRowsState* done = state.mutable_done();
    done->set_splits_below(p.done->splits_below);
    for (int64_t split : p.done->splits) done->add_splits(split);
    for (const auto& [file, ranges] : p.done->records) {
      FileRecordRanges* f = done->add_records();
      f->set_file(file);
      for (const auto& [begin, end] : ranges) {
        f->add_ranges(begin);
        f->add_ranges(end);
      }
    }
  }
  if (p.shard) {
    ShardProgress* shard = state.mutable_shard();
    shard->set_global_batches(p.shard->global_batches);
    shard->set_global_batch_size(p.shard->global_batch_size);
    shard->set_num_shards(p.shard->num_shards);
    shard->set_pad(p.shard->pad);
  }
  if (p.shuffle) {
    ShuffleState* shuffle = state.mutable_shuffle();
    shuffle->set_emitted(p.shuffle->emitted);
    shuffle->set_oldest(p.shuffle->oldest);
    shuffle->set_input_rows(p.shuffle->input_rows);
  }
  const std::string unsummed = state.SerializeAsString();
  state.set_checksum(io::Crc32c(unsummed.data(), unsummed.size()));
  return state.SerializeAsString();
}

std::optional<uint64_t> StateEpoch(const std::string& bytes) {
  IteratorState state;
  if (!state.ParseFromString(bytes) || state.magic() != kMagic) return std::nullopt;
  return state.epoch();
}

std::optional<int> StateShards(const std::string& bytes) {
  IteratorState state;
  if (!state.ParseFromString(bytes) || state.magic() != kMagic) return std::nullopt;
  return state.has_shard() ? state.shard().num_shards() : 0;
}

absl::StatusOr<EpochPosition> ParseState(const std::string& bytes, const std::string& fingerprint,
                                         const std::string& listing) {
  IteratorState state;
  // A state cut right after its magic has no format_version (field 2).
  if (!state.ParseFromString(bytes) || state.magic() != kMagic || state.format_version() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a sluice iterator state (", bytes.size(), " bytes; truncated, or other data)"));
  }
  if (state.format_version() != kFormatVersion && state.format_version() != kUnsummedFormatVersion) {
    // A changed byte in the version itself: the checksum says so.
    if (state.has_checksum() && CheckSum(state, bytes.size()).code() == absl::StatusCode::kDataLoss) {
      return absl::DataLossError(absl::StrCat(
          "the iterator state is damaged: its checksum does not match its contents, and its format_version reads ",
          state.format_version(), ", which this sluice (", SLUICE_VERSION_STRING,
          ") does not read either (changed on "
          "disk or in transit, or saved by a newer sluice)"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the state's format_version is ", state.format_version(), " (saved by sluice ", state.sluice_version(),
        "); this sluice (", SLUICE_VERSION_STRING, ") reads ", kUnsummedFormatVersion, " and ", kFormatVersion));
  }
  SLUICE_RETURN_IF_ERROR(CheckSum(state, bytes.size()));
  if (state.pipeline_fingerprint() != fingerprint) {
    return absl::InvalidArgumentError(absl::StrCat("the state is another pipeline's: its pipeline_fingerprint is ",
                                                   state.pipeline_fingerprint(), ", this pipeline's ", fingerprint,
                                                   " (a change to the source, an op, an attr or the seed changes it)"));
  }
  if (!state.listing().empty() && !listing.empty() && state.listing() != listing) {
    return absl::InvalidArgumentError(
        absl::StrCat("the state was saved over another listing of the source's files (", state.listing(),
                     "; this pipeline's: ", listing,
                     "): files were added, removed or renamed since, and resuming would deliver some samples "
                     "twice and skip others; start the epoch again"));
  }
  if (state.split() < 0 || state.record() < 0 || state.elements() < 0 || state.rows() < 0 || state.repeat() < 0 ||
      state.repeat() >= static_cast<int64_t>(kRepeatEpochStride)) {
    return absl::InvalidArgumentError("the state's repeat, split, record, elements and rows must be >= 0");
  }
  EpochPosition p;
  p.epoch = state.epoch(), p.repeat = state.repeat(), p.split = state.split(), p.record = state.record();
  p.elements = state.elements(), p.rows = state.rows();
  if (state.has_shuffle()) {
    const ShuffleState& shuffle = state.shuffle();
    if (shuffle.emitted() < 0 || shuffle.oldest() < 0 || shuffle.input_rows() < -1) {
      return absl::InvalidArgumentError("the state's shuffle emitted and oldest must be >= 0, input_rows >= -1");
    }
    p.shuffle = ShufflePosition{shuffle.emitted(), shuffle.oldest(), shuffle.input_rows()};
  }
  if (state.has_done()) {
    SLUICE_ASSIGN_OR_RETURN(p.done, ParseDone(state.done()));
  }
  p.remote_job = state.remote().job();
  p.remote_client = state.remote().client();
  if (state.has_shard()) {
    const ShardProgress& shard = state.shard();
    if (shard.global_batches() < 0 || shard.global_batch_size() < 1 || shard.num_shards() < 1) {
      return absl::InvalidArgumentError(
          "the state's shard progress is malformed: global_batches must be >= 0, its size and shards >= 1");
    }
    p.shard =
        EpochPosition::Sharded{shard.global_batches(), shard.global_batch_size(), shard.num_shards(), shard.pad()};
  }
  return p;
}

}  // namespace sluice::exec
