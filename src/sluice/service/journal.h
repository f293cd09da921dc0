// The dispatcher's journal: its state changes as JournalEntry records in a
// TFRecord file (each frame carries its length's and its data's CRC32C)
// under --work-dir, replayed on restart.
//
// An entry is written (Append) under the dispatcher's lock and made durable
// (Sync) after it, before the RPC that made it answers: callers that sync
// at once share one fdatasync, so a burst of updates does not queue on the
// disk. A failed write is cut back off the file and, like a failed sync,
// stops the journal: every later call fails with that error, and the
// dispatcher accepts no work it cannot persist. Past `compact_bytes` the
// dispatcher rewrites the journal as a snapshot of its state (Compact).
#ifndef SLUICE_SERVICE_JOURNAL_H_
#define SLUICE_SERVICE_JOURNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service.pb.h"

namespace sluice::service {

// Thread-safe.
class Journal {
 public:
  struct Options {
    // Compact once the file is larger than this.
    uint64_t compact_bytes = uint64_t{64} << 20;
  };
  // Opens (creating) DIR/journal.tfrecord and returns what it held in
  // *replay; FailedPrecondition while another journal holds DIR (another
  // dispatcher's, naming its pid). A torn tail (frames that do not check, with none that checks
  // after them: the process died mid-write) is cut off and reported in
  // *warning; a damaged frame with good ones after it is DataLoss naming
  // its offset: replaying around a hole would resurrect a wrong state.
  static absl::StatusOr<std::unique_ptr<Journal>> Open(const std::string& dir, Options options,
                                                       std::vector<JournalEntry>* replay, std::string* warning);
  ~Journal();

  // Writes `entry`; returns its sequence number for Sync.
  absl::StatusOr<uint64_t> Append(const JournalEntry& entry);
  // Returns once every entry up to `seq` is durable.
  absl::Status Sync(uint64_t seq);
  // The sequence number of the last entry written.
  uint64_t appended() const;
  bool wants_compaction() const;
  // Replaces the journal by `snapshot` (entries that rebuild the current
  // state), atomically: a crash leaves the old journal or the new one.
  absl::Status Compact(const std::vector<JournalEntry>& snapshot);

  const std::string& path() const { return path_; }
  uint64_t bytes() const;

 private:
  Journal(std::string path, Options options, int fd, int lock_fd, uint64_t bytes);
  absl::Status Failed(absl::Status error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const Options options_;
  const int lock_fd_;  // holds the work dir's lock
  mutable absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_);
  uint64_t appended_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t synced_ ABSL_GUARDED_BY(mu_) = 0;
  bool syncing_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar synced_cv_;
  uint64_t compact_at_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  std::string frame_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_JOURNAL_H_
