// What the source node needs of a file format: the columns it yields, its
// splits, and a reader per split.
#ifndef SLUICE_IO_SOURCE_FORMAT_H_
#define SLUICE_IO_SOURCE_FORMAT_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/core/batch_builder.h"
#include "sluice/core/schema.h"
#include "sluice/io/corruption_log.h"
#include "sluice/io/file_split.h"

namespace sluice::io {

// The rows of a split that a shard right after the source keeps. Rows are
// placed by their count from the source's first row; the shard keeps those
// whose place p has p mod period in [lo, hi), and from tail_from on (the
// epoch's last, partial global batch) all rows when it pads, none when it
// drops them.
struct KeptRows {
  int64_t first = 0;  // the place of the split's first row
  int64_t period = 1;
  int64_t lo = 0;
  int64_t hi = 1;
  int64_t tail_from = std::numeric_limits<int64_t>::max();
  bool tail_kept = false;

  bool Keeps(int64_t place) const {
    if (place >= tail_from) return tail_kept;
    const int64_t q = place % period;
    return q >= lo && q < hi;
  }
};

// Reads the records of one split in order. Thread-compatible.
class SplitReader {
 public:
  virtual ~SplitReader() = default;
  // Appends up to `max_rows` rows to `out` (with their provenance) and
  // returns how many; 0 means the split is done.
  virtual absl::StatusOr<int64_t> Read(int64_t max_rows, BatchBuilder* out) = 0;
  // Passes over up to `max_rows` rows without making them, and returns how
  // many; 0 means the split is done. Unimplemented when the reader can
  // only read them.
  virtual absl::StatusOr<int64_t> Skip(int64_t max_rows) {
    return absl::UnimplementedError("this reader passes over rows by reading them");
  }

  // True when the reader holds its records in memory and can hand them out
  // as views (View) instead of copies (Read).
  virtual bool views() const { return false; }
  // Sets `out` to the next up to `max_rows` rows, viewing the reader's
  // memory, and appends their runs to out->provenance (whose files the
  // caller set); returns how many, 0 when the split is done.
  // REQUIRES: views().
  virtual absl::StatusOr<int64_t> View(int64_t max_rows, Batch* out) {
    return absl::UnimplementedError("this reader copies its records");
  }

  // Only the rows `kept` names will be used. A reader whose rows cost more
  // to make than to pass over (a Python dataset's items, image files) may
  // leave the others hollow: zero bytes and empty strings, with their
  // provenance.
  virtual void KeepOnly(const KeptRows& kept) {}

  // The source shuffles. A reader that makes records in any order at no
  // cost (a Python dataset's items) reads records [a, b) of its split as
  // items perm(a) .. perm(b - 1) of a permutation of all of the source's,
  // drawn from `key` (anew each epoch): a shuffle of its splits then mixes
  // single samples, as DataLoader(shuffle=True) does, not runs of a split.
  // Records stay the samples' places (identity, checkpoints, shards).
  virtual void PermuteRecords(uint64_t key) {}

  // A reader that waits on something outside the engine (a Python process
  // running the user's code) stops waiting once `*cancelled` (may be null)
  // turns true.
  void WatchCancellation(const std::atomic<bool>* cancelled) { cancelled_ = cancelled; }
  // Such a reader adds to `*progress` the records it has begun within its
  // current chunk (a Python dataset's items, made one by one in one call):
  // a service worker reports them as the split's progress while no chunk
  // is out yet. May be null.
  void CountProgress(std::atomic<int64_t>* progress) { progress_ = progress; }

 protected:
  const std::atomic<bool>* cancelled_ = nullptr;
  std::atomic<int64_t>* progress_ = nullptr;
};

// Thread-safe: readers of different splits may run concurrently. Readers
// must not outlive the format that opened them.
class SourceFormat {
 public:
  virtual ~SourceFormat() = default;
  virtual const Schema& schema() const = 0;
  // Shared with every batch's Provenance.
  virtual const std::shared_ptr<const std::vector<std::string>>& files() const = 0;
  // The splits of one epoch, in file order.
  virtual std::vector<Split> MakeSplits() const = 0;
  // The records of `split`, where its records() is unknown but the format
  // can tell without reading it (a TFRecord read whole that has an index
  // file); -1 if it cannot.
  virtual int64_t CountRecords(const Split& split) const { return split.records(); }
  // Whether OpenSplit honours any begin_record within a split (a resumed
  // epoch starts there instead of reading and dropping the records before
  // it): record-addressed formats, and TFRecords, which pass over records
  // by their headers.
  virtual bool SeeksRecords() const { return false; }
  // The bytes of the pipeline's pool that `split`'s rows take once read
  // (a source reading splits ahead holds each split whole), where the
  // format can tell before reading; 0 where it cannot, or where its readers
  // view memory of their own instead of copying rows into the pool.
  virtual int64_t SplitPoolBytes(const Split& split) const { return 0; }
  // Loads what reading needs that the format would load on its first read
  // (a Python dataset's code): the service's workers call it on
  // registration, so code that cannot load fails there, not mid-epoch.
  virtual absl::Status Load() const { return absl::OkStatus(); }
  // `skip_log` (may be null) receives skipped corrupt records.
  virtual absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog* skip_log) const = 0;
  // The file OpenSplit(split) opens and reads from its start, which a source
  // may open ahead (io::OpenObjectAhead); empty where OpenSplit opens none
  // (files kept open, or opened by another library) or starts mid-file.
  virtual std::string FileReadFromStart(const Split&) const { return ""; }
  // What the source derives from its files beside their names and splits
  // (an image folder's labels), for a state's listing: a state saved over
  // other such values would be resumed with them. "" when nothing.
  virtual std::string ListingExtra() const { return ""; }
};

}  // namespace sluice::io

#endif  // SLUICE_IO_SOURCE_FORMAT_H_
