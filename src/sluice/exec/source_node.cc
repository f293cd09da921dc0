// Source node: reads the splits of the epoch in order (reshuffled per epoch
// on request) and yields chunks of chunk_rows records (fewer at the epoch's
// end, and where large records fill RaggedChunkBytes); with
// parallel_reads, several splits are read ahead at once.
#include <algorithm>
#include <deque>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/core/batch_builder.h"
#include "sluice/core/rng.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/iterator.h"
#include "sluice/exec/row_copier.h"
#include "sluice/exec/split_read_ahead.h"
#include "sluice/io/object_store.h"
#include "sluice/io/thread_cancel.h"

namespace sluice::exec {
namespace {

// A chunk of large variable-length rows (video clips, volumes, long
// documents) ends before the next row would take its bytes past this:
// chunk_rows of 300 MB records made one chunk of 38 GB (and its builder
// reserved that much up front). An eighth of the memory budget at most:
// 4 MB records filled 64 MiB chunks (88 MiB of RSS as they grew) under a
// 16 MiB budget.
int64_t RaggedChunkBytes(int64_t memory_budget) {
  constexpr int64_t kMost = int64_t{64} << 20;
  return memory_budget > 0 ? std::min(kMost, memory_budget / 8) : kMost;
}

// The ragged bytes of `chunk`'s columns.
int64_t RaggedBytes(const Batch& chunk) {
  int64_t bytes = 0;
  for (const Column& c : chunk.columns) {
    if (c.ragged()) bytes += c.values.num_elements();
  }
  return bytes;
}

// Whether `chunk` is full by `cap` ragged bytes (a row more at its mean
// would pass it), however few its rows.
bool RaggedFull(const Batch& chunk, int64_t cap) {
  const int64_t bytes = RaggedBytes(chunk);
  return chunk.rows > 0 && bytes > 0 && bytes + bytes / chunk.rows > cap;
}

// How many of `chunk`'s first rows (max_rows at most) hold no more than
// `room` ragged bytes, one at least when `first`; their bytes into *bytes.
int64_t RowsWithinBytes(const Batch& chunk, int64_t max_rows, int64_t room, bool first, int64_t* bytes) {
  *bytes = 0;
  int64_t n = 0;
  for (; n < std::min(max_rows, chunk.rows); ++n) {
    int64_t row = 0;
    for (const Column& c : chunk.columns) {
      if (c.ragged()) row += static_cast<int64_t>(c.RaggedRow(n).size());
    }
    if (*bytes + row > room && !(first && n == 0)) break;
    *bytes += row;
  }
  return n;
}

class SourceIterator : public Iterator {
 public:
  explicit SourceIterator(const IteratorArgs& args)
      : ctx_(args.ctx),
        pool_(args.output_pool()),
        stats_(args.stats),
        node_(*args.node),
        epoch_(args.epoch),
        chunk_rows_(args.chunk_rows),
        ragged_cap_(RaggedChunkBytes(ctx_->memory.limit())),
        next_chunk_rows_(args.first_chunk_rows > 0 ? args.first_chunk_rows : args.chunk_rows) {
    if (ctx_->only_splits) {
      splits_ = ctx_->splits;
    } else if (ctx_->orders != nullptr) {
      splits_ = *ctx_->orders->Get(args.epoch);
    } else {
      splits_ = EpochSplitOrder(node_, ctx_->seed, args.epoch);
    }
    if (const EpochPosition* resume = ctx_->ResumeOf(args.epoch)) {
      if (resume->done) {
        done_ = &*resume->done;
        if (node_.format->SeeksRecords()) SkipDonePrefixes();
      } else {
        StartAt(resume->split, resume->record);
        if (ctx_->resume_selection) select_ = &*ctx_->resume_selection;
      }
    }
    PlaceSplits();
  }
  // The read-ahead threads read the members after it (places_, passed_):
  // they stop first.
  ~SourceIterator() override { read_ahead_.reset(); }

  absl::Status GetNext(Batch* out, bool* end) override {
    const io::ScopedThreadCancel cancel(ctx_->cancel.flag());
    while (true) {
      SLUICE_RETURN_IF_ERROR(Throttle());
      absl::Status s = Read(out, end);
      if (!s.ok() || *end) return s;
      bytes_ += static_cast<int64_t>(out->ByteSize());
      if (!DropResumed(out) && !DropDone(out)) return absl::OkStatus();
    }
  }

 private:
  absl::Status Read(Batch* out, bool* end) {
    if (node_.parallel_reads > 1 && splits_.size() > 1) return ReadAhead(out, end);
    CpuToken token(&ctx_->cpu);
    if (!token.held()) return absl::CancelledError("pipeline cancelled");
    // Readers of in-memory records hand out views: a chunk per call, which
    // may be short at the end of a split.
    while (true) {
      SLUICE_ASSIGN_OR_RETURN(bool more, EnsureReader());
      if (!more || !reader_->views()) break;
      *out = Batch();
      out->provenance = Provenance(node_.format->files());
      const Run run = NextRun();
      absl::StatusOr<int64_t> n =
          run.pass > 0 ? reader_->Skip(run.pass) : reader_->View(std::min(next_chunk_rows_, run.keep), out);
      if (!n.ok()) return WithContext(n.status(), Where());
      row_ += *n;
      split_rows_ += *n;
      if (*n > 0 && run.pass > 0) continue;
      if (*n > 0) {
        *end = false;
        next_chunk_rows_ = chunk_rows_;
        return absl::OkStatus();
      }
      EndSplit();
    }
    BatchBuilder builder(node_.output_schema, next_chunk_rows_, pool_, ragged_hint_);
    builder.CapRaggedBytes(ragged_cap_);
    next_chunk_rows_ = chunk_rows_;
    builder.provenance() = Provenance(node_.format->files());
    while (builder.RowsWithin() > 0) {
      SLUICE_ASSIGN_OR_RETURN(bool more, EnsureReader());
      if (!more) break;
      const Run run = NextRun();
      absl::StatusOr<int64_t> n =
          run.pass > 0 ? PassOver(run.pass) : reader_->Read(std::min(builder.RowsWithin(), run.keep), &builder);
      if (!n.ok()) return WithContext(n.status(), Where());
      row_ += *n;
      split_rows_ += *n;
      if (*n == 0) EndSplit();
    }
    *end = builder.rows() == 0;
    *out = builder.Finish();
    UpdateRaggedHint(*out);
    return absl::OkStatus();
  }

  // Waits until the bytes delivered so far fit the throttle's rate.
  absl::Status Throttle() {
    if (node_.throttle_bytes_per_s <= 0) return absl::OkStatus();
    if (start_ns_ == 0) start_ns_ = NowNs();
    const int64_t due = start_ns_ + static_cast<int64_t>(bytes_ / node_.throttle_bytes_per_s * 1e9);
    for (int64_t now = NowNs(); now < due; now = NowNs()) {
      if (ctx_->cancel.cancelled()) return absl::CancelledError("pipeline cancelled");
      absl::SleepFor(absl::Nanoseconds(std::min<int64_t>(due - now, 20'000'000)));
    }
    return absl::OkStatus();
  }

  // Chunks of chunk_rows_ rows, as the sequential path cuts them (or fewer
  // filling ragged_cap_): a chunk that ends a split is topped up with
  // the next split's first rows
  // (copied), so batches still pass the batch node with no copy. Copying
  // the records here is cheap beside copying what a map made of them
  // (W3's 200-image shards: 28 MB of JPEGs instead of a 154 MB batch).
  absl::Status ReadAhead(Batch* out, bool* end) {
    SLUICE_RETURN_IF_ERROR(ahead_error_);
    const int64_t want = next_chunk_rows_;
    SLUICE_ASSIGN_OR_RETURN(bool more, AwaitAhead());
    *end = !more;
    *out = Batch();
    if (!more) return absl::OkStatus();
    next_chunk_rows_ = chunk_rows_;
    if (ahead_.front().rows >= want || RaggedFull(ahead_.front(), ragged_cap_)) {
      *out = std::move(ahead_.front());
      ahead_.pop_front();
      return absl::OkStatus();
    }
    RowCopier copier(node_.output_schema, want, pool_);
    int64_t room = ragged_cap_;
    while (copier.rows() < want && more) {
      const int64_t front_rows = ahead_.front().rows;
      int64_t bytes = 0;
      const int64_t n = RowsWithinBytes(ahead_.front(), want - copier.rows(), room, copier.rows() == 0, &bytes);
      if (n > 0) copier.TakeFront(&ahead_, n);
      room -= bytes;
      if (n < front_rows) break;  // full, by its rows or its bytes
      if (copier.rows() < want) {
        absl::StatusOr<bool> next = AwaitAhead();
        if (!next.ok()) ahead_error_ = next.status();  // after the rows before it
        more = next.value_or(false);
      }
    }
    *out = copier.Finish();
    return absl::OkStatus();
  }

  // Waits until a chunk read ahead is queued; false when the epoch's
  // splits are done.
  absl::StatusOr<bool> AwaitAhead() {
    if (read_ahead_ == nullptr) {
      read_ahead_ = std::make_unique<SplitReadAhead>(
          splits_.size(), node_.parallel_reads,
          [this](size_t split, const std::atomic<bool>& stop, std::vector<Batch>* chunks) {
            const int64_t cpu_start = stats_ != nullptr ? ThreadCpuNs() : 0;
            absl::Status read = ReadSplit(split, stop, chunks);
            if (stats_ != nullptr) stats_->read_ahead_cpu_ns.fetch_add(ThreadCpuNs() - cpu_start);
            return read;
          },
          &ctx_->memory, ctx_->split_bytes.get());
    }
    while (ahead_.empty()) {
      std::vector<Batch> chunks;
      SLUICE_ASSIGN_OR_RETURN(const bool more, read_ahead_->Next(&chunks));
      if (!more) return false;
      for (Batch& c : chunks) ahead_.push_back(std::move(c));
    }
    return true;
  }

  // A reader of split `split` of the epoch's order, told what it needs to
  // know: the rows a shard keeps, the epoch's record order when the source
  // shuffles, the pipeline's cancellation and progress.
  absl::StatusOr<std::unique_ptr<io::SplitReader>> Open(size_t split) const {
    absl::StatusOr<std::unique_ptr<io::SplitReader>> reader =
        node_.format->OpenSplit(splits_[split], node_.skip_corrupt ? &ctx_->skips : nullptr);
    if (!reader.ok()) return WithContext(reader.status(), Where());
    if (!places_.empty()) (*reader)->KeepOnly(KeptOf(split));
    if (node_.shuffle_splits) (*reader)->PermuteRecords(RecordOrderKey(ctx_->seed, node_.name, epoch_));
    (*reader)->WatchCancellation(ctx_->cancel.flag());
    (*reader)->CountProgress(ctx_->progress.get());
    return reader;
  }

  // All of split `split`, in chunks of chunk_rows_ or ragged_cap_
  // (on a reader thread).
  absl::Status ReadSplit(size_t split, const std::atomic<bool>& stop, std::vector<Batch>* chunks) const {
    if (done_ != nullptr && done_->SplitDone(static_cast<int64_t>(split))) return absl::OkStatus();
    const io::ScopedThreadCancel cancel(ctx_->cancel.flag());
    // Watching the pipeline's cancellation, not the read-ahead's `stop`: a
    // read stopped early (an epoch cut by a take) lets a slow Python item
    // finish, and teardown must not wait for a stuck one (its consumer
    // holds the read-ahead).
    absl::StatusOr<std::unique_ptr<io::SplitReader>> reader = Open(split);
    if (!reader.ok()) return reader.status();
    int64_t ragged_hint = ragged_hint_;
    int64_t rows = 0;
    while (!stop) {
      CpuToken token(&ctx_->cpu);
      if (!token.held()) return absl::CancelledError("pipeline cancelled");
      Batch chunk;
      chunk.provenance = Provenance(node_.format->files());
      int64_t n = 0;
      if ((*reader)->views()) {
        absl::StatusOr<int64_t> viewed = (*reader)->View(chunk_rows_, &chunk);
        if (!viewed.ok()) return WithContext(viewed.status(), Where());
        n = *viewed;
      } else {
        BatchBuilder builder(node_.output_schema, chunk_rows_, pool_, ragged_hint);
        builder.CapRaggedBytes(ragged_cap_);
        builder.provenance() = chunk.provenance;
        while (builder.RowsWithin() > 0) {
          absl::StatusOr<int64_t> got = (*reader)->Read(builder.RowsWithin(), &builder);
          if (!got.ok()) return WithContext(got.status(), Where());
          if (*got == 0) break;
        }
        n = builder.rows();
        chunk = builder.Finish();
        if (n > 0) ragged_hint = RaggedHint(chunk);
      }
      if (n == 0) {
        if (ctx_->ledger != nullptr) ctx_->ledger->SplitEnded(static_cast<int64_t>(split), rows + Passed(split));
        return absl::OkStatus();
      }
      rows += n;
      chunks->push_back(std::move(chunk));
    }
    return absl::CancelledError("pipeline stopped");
  }

  // Opens the next split's reader unless one is open; false when the
  // epoch's splits are done.
  absl::StatusOr<bool> EnsureReader() {
    if (reader_) return true;
    while (done_ != nullptr && next_split_ < splits_.size() && done_->SplitDone(static_cast<int64_t>(next_split_))) {
      ++next_split_;
    }
    if (next_split_ == splits_.size()) return false;
    absl::StatusOr<std::unique_ptr<io::SplitReader>> reader = Open(next_split_++);
    if (!reader.ok()) return reader.status();
    reader_ = *std::move(reader);
    OpenNextObjectAhead();
    return true;
  }

  // The next split's object starts opening while this one is read: its
  // round trips to the store overlap this split's reading. This split's
  // object, opened ahead before, is held until the next split: a reader may
  // open its file on its first read.
  void OpenNextObjectAhead() {
    this_object_ = std::move(next_object_);
    if (next_split_ == splits_.size() || splits_[next_split_].file == splits_[next_split_ - 1].file) return;
    const std::string next = node_.format->FileReadFromStart(splits_[next_split_]);
    if (!next.empty()) next_object_ = io::OpenObjectAhead(next);
  }

  std::string Where() const { return absl::StrCat("node '", node_.name, "'"); }

  // A shard right after the source keeps some of its rows (kept_by_shard):
  // places each split's first row, counted from the source's first, for
  // its reader to know which (KeptOf). A resumed epoch starts at a global
  // batch's first row, so its rows are placed from there: those of the
  // resumed split that a format which cannot start mid-split reads again
  // (DropResumed) just before it. Places nothing where rows may be passed
  // over before the shard counts them (a shuffle's replay, an unordered
  // epoch, corrupt records skipped), or where a split's length is unknown:
  // there every row is made.
  void PlaceSplits() {
    if (!node_.kept_by_shard || ctx_->only_splits || ctx_->ledger != nullptr || done_ != nullptr ||
        select_ != nullptr || node_.skip_corrupt || splits_.empty()) {
      return;
    }
    const int64_t period = node_.kept_by_shard->global_batch();
    const int64_t again = resume_file_ >= 0 ? std::max<int64_t>(0, resume_record_ - splits_.front().begin_record) : 0;
    int64_t place = (again + period - 1) / period * period - again;
    for (const io::Split& split : splits_) {
      if (split.end_record < 0) {
        places_.clear();
        return;
      }
      places_.push_back(place);
      place += split.end_record - split.begin_record;
    }
    epoch_rows_ = place;
  }

  io::KeptRows KeptOf(size_t split) const {
    const graph::ShardSpec& shard = *node_.kept_by_shard;
    io::KeptRows kept;
    kept.first = places_[split];
    kept.period = shard.global_batch();
    kept.lo = shard.index * shard.batch;
    kept.hi = kept.lo + shard.batch;
    kept.tail_from = epoch_rows_ - epoch_rows_ % kept.period;
    kept.tail_kept = shard.pad;
    return kept;
  }

  // Rows to pass over next, or else to keep (select_: a resumed shuffle's
  // replay); one of the two is 0.
  struct Run {
    int64_t pass = 0;
    int64_t keep = std::numeric_limits<int64_t>::max();
  };
  Run NextRun() {
    if (select_ == nullptr || row_ >= select_->through) return Run{};
    const std::vector<int64_t>& kept = select_->kept;
    while (next_kept_ < kept.size() && kept[next_kept_] < row_) ++next_kept_;
    const int64_t next = next_kept_ < kept.size() ? kept[next_kept_] : select_->through;
    if (next > row_) return Run{next - row_, 0};
    size_t last = next_kept_;
    while (last + 1 < kept.size() && kept[last + 1] == kept[last] + 1) ++last;
    return Run{0, kept[last] - row_ + 1};
  }

  // Up to `rows` rows passed over; 0 when the split is done.
  absl::StatusOr<int64_t> PassOver(int64_t rows) {
    absl::StatusOr<int64_t> n = reader_->Skip(rows);
    if (n.ok() || !absl::IsUnimplemented(n.status())) return n;
    BatchBuilder scratch(node_.output_schema, std::min(rows, chunk_rows_), pool_, ragged_hint_);
    scratch.CapRaggedBytes(ragged_cap_);
    scratch.provenance() = Provenance(node_.format->files());
    while (const int64_t room = scratch.RowsWithin()) {
      SLUICE_ASSIGN_OR_RETURN(const int64_t got, reader_->Read(room, &scratch));
      if (got == 0) break;
    }
    return scratch.rows();
  }

  // A resumed epoch starts at `record` of split `split`: record-addressed
  // splits start there, others are read from their start and the rows
  // before it dropped (DropResumed).
  void StartAt(int64_t split, int64_t record) {
    splits_.erase(splits_.begin(), splits_.begin() + std::min<size_t>(split, splits_.size()));
    if (splits_.empty()) return;
    io::Split& first = splits_.front();
    // Read to its end: the next split, in the epoch's order, is the first.
    // (Its rows were dropped up to `record`, and so were those of any split
    // after it in the same file before that row: shuffled row groups.)
    if (first.end_record >= 0 && record >= first.end_record) {
      splits_.erase(splits_.begin());
      return;
    }
    if (node_.format->SeeksRecords()) {
      first.begin_record = std::max(first.begin_record, record);
      return;
    }
    resume_file_ = first.file;
    resume_record_ = record;
    // The first chunk reads the rows it will drop on top of its own, so the
    // chunks after a resume line up with batches as before (a short first
    // chunk would make the first batch wait for two chunks' work).
    next_chunk_rows_ += std::max<int64_t>(0, record - first.begin_record);
  }

  // The split being read is done: tells the ledger (unordered mode) how
  // many rows it had.
  void EndSplit() {
    reader_.reset();
    const size_t split = next_split_ - 1;
    if (ctx_->ledger != nullptr) ctx_->ledger->SplitEnded(static_cast<int64_t>(split), split_rows_ + Passed(split));
    split_rows_ = 0;
  }

  // An unordered resumed epoch: each split starts after the records done
  // at its start (in flight, rows complete nearly in order, so most of a
  // split's done records are its first ones); the others are dropped as
  // read (DropDone).
  void SkipDonePrefixes() {
    passed_.assign(splits_.size(), 0);
    for (size_t s = 0; s < splits_.size(); ++s) {
      io::Split& split = splits_[s];
      const int64_t begin = done_->DonePrefixEnd(split);
      passed_[s] = begin - split.begin_record;
      split.begin_record = begin;
    }
  }
  // Rows of split `split` SkipDonePrefixes passed over.
  int64_t Passed(size_t split) const { return split < passed_.size() ? passed_[split] : 0; }

  // An unordered resumed epoch: drops the chunk's rows done before the
  // save (their records are in done_); true when none is left.
  bool DropDone(Batch* chunk) const {
    if (done_ == nullptr || done_->records.empty()) return false;
    std::vector<bool> keep(chunk->rows);
    int64_t kept = 0;
    for (int64_t r = 0; r < chunk->rows; ++r) {
      const RowOrigin o = chunk->provenance.Origin(r);
      keep[r] = !done_->RecordDone(o.file, o.record);
      kept += keep[r];
    }
    if (kept == chunk->rows) return false;
    if (kept == 0) return true;
    RowCopier copier(node_.output_schema, kept, pool_);
    for (int64_t r = 0; r < chunk->rows;) {  // runs of kept rows
      int64_t e = r;
      while (e < chunk->rows && keep[e] == keep[r]) ++e;
      if (keep[r]) copier.Append(*chunk, r, e);
      r = e;
    }
    *chunk = copier.Finish();
    return false;
  }

  // A resumed epoch: drops the chunk's leading rows of the resumed file
  // before the resume record (delivered before the save); true when none
  // is left. Skipping stops at the first row past them.
  bool DropResumed(Batch* chunk) {
    if (resume_file_ < 0) return false;
    int64_t drop = 0;
    for (; drop < chunk->rows; ++drop) {
      const RowOrigin o = chunk->provenance.Origin(drop);
      if (o.file != resume_file_ || o.record >= resume_record_) {
        resume_file_ = -1;
        break;
      }
    }
    if (drop == chunk->rows) return true;
    if (drop > 0) *chunk = chunk->Slice(drop, chunk->rows);
    return false;
  }

  // Sizes the next chunk's byte buffer from this one's bytes, so it rarely
  // grows: a chunk of the same rows. Not past kRaggedHintBytes: chunks of
  // large records vary (a 70 MiB record's chunk, then one of a few KiB),
  // and a block reserved for the one before and held by the next (in a
  // shuffle buffer) counted 2x the memory touched. Beyond it a chunk's
  // buffer grows as its records come (by half its bytes in copies at most).
  void UpdateRaggedHint(const Batch& chunk) { ragged_hint_ = RaggedHint(chunk, ragged_hint_); }
  static int64_t RaggedHint(const Batch& chunk, int64_t hint = 0) {
    constexpr int64_t kRaggedHintBytes = int64_t{16} << 20;
    for (const Column& c : chunk.columns) {
      if (c.ragged() && chunk.rows > 0) {
        const int64_t bytes = c.values.num_elements() * 9 / 8;
        hint = bytes <= kRaggedHintBytes ? bytes + 64 : 0;
      }
    }
    return hint;
  }

  ExecContext* ctx_;
  BufferPool* pool_;
  NodeStats* stats_;  // null when statistics are off
  const graph::CompiledNode& node_;
  const uint64_t epoch_;
  int64_t chunk_rows_;
  const int64_t ragged_cap_;  // RaggedChunkBytes
  int64_t next_chunk_rows_;   // the first chunk's may differ (IteratorArgs::first_chunk_rows)
  std::vector<io::Split> splits_;
  size_t next_split_ = 0;
  std::unique_ptr<io::SplitReader> reader_;
  // Objects opened ahead (io::OpenObjectAhead): this split's and the next's.
  std::shared_ptr<const void> this_object_;
  std::shared_ptr<const void> next_object_;
  absl::Status ahead_error_;  // a split's, met while topping up a chunk
  int64_t ragged_hint_ = 0;
  std::unique_ptr<SplitReadAhead> read_ahead_;  // parallel_reads > 1
  std::deque<Batch> ahead_;                     // the chunks of the split being handed on
  const DoneRows* done_ = nullptr;              // an unordered resumed epoch's
  int64_t split_rows_ = 0;                      // made of the split being read
  std::vector<int64_t> passed_;                 // per split, by SkipDonePrefixes
  const RowSelection* select_ = nullptr;        // ExecContext::resume_selection
  int64_t row_ = 0;                             // rows kept or passed over
  size_t next_kept_ = 0;                        // in select_->kept
  int32_t resume_file_ = -1;                    // StartAt's, until passed
  int64_t resume_record_ = 0;
  std::vector<int64_t> places_;  // PlaceSplits'
  int64_t epoch_rows_ = 0;       // this epoch's at the source, when placed
  int64_t bytes_ = 0;            // delivered, for the throttle
  int64_t start_ns_ = 0;         // first GetNext, for the throttle
};

}  // namespace

std::unique_ptr<Iterator> MakeSourceIterator(const IteratorArgs& args) {
  return std::make_unique<SourceIterator>(args);
}

}  // namespace sluice::exec
