#include "sluice/service/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/corruption_log.h"
#include "sluice/io/random_access_file.h"
#include "sluice/io/tfrecord_reader.h"
#include "sluice/io/tfrecord_writer.h"

namespace sluice::service {
namespace {

// The offset of the first whole, checking frame after the damaged one at
// `damaged`, if any: the reader's resynchronization, run from there.
absl::StatusOr<std::optional<uint64_t>> NextGoodFrame(const std::string& path, uint64_t damaged) {
  io::CorruptionLog skipped;
  io::TfRecordReader::Options options;
  options.skip_log = &skipped;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<io::TfRecordReader> reader, io::TfRecordReader::Open(path, options));
  reader->Seek(damaged, 0);
  SLUICE_ASSIGN_OR_RETURN(std::optional<absl::string_view> record, reader->Next());
  if (!record.has_value()) return std::nullopt;
  return reader->offset() - record->size() - 16;
}

// Reads every entry up to the end or a torn tail; returns the byte length
// of the good part.
absl::StatusOr<uint64_t> ReadEntries(const std::string& path, std::vector<JournalEntry>* out, std::string* warning) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;  // a new journal
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<io::TfRecordReader> reader, io::TfRecordReader::Open(path));
  while (true) {
    const uint64_t offset = reader->offset();
    absl::StatusOr<std::optional<absl::string_view>> record = reader->Next();
    if (!record.ok()) {
      SLUICE_ASSIGN_OR_RETURN(std::optional<uint64_t> good, NextGoodFrame(path, offset));
      if (good.has_value()) {
        return absl::DataLossError(
            absl::StrCat("the journal ", path, " is damaged at offset ", offset,
                         " and holds good entries after it (from offset ", *good, "): ", record.status().message(),
                         "; refusing to replay around the hole (move the file aside to start the dispatcher empty)"));
      }
      *warning = absl::StrCat("cut a torn tail of ", static_cast<uint64_t>(st.st_size) - offset, " bytes off ", path,
                              " at offset ", offset, " (", record.status().message(), ")");
      return offset;
    }
    if (!record->has_value()) return offset;
    JournalEntry entry;
    if (!entry.ParseFromArray((*record)->data(), static_cast<int>((*record)->size()))) {
      return absl::DataLossError(absl::StrCat("the journal ", path, " holds an entry at offset ", offset,
                                              " whose CRCs check but that is not a journal entry (written by "
                                              "another version of sluice?)"));
    }
    out->push_back(std::move(entry));
  }
}

// Writes all of `bytes` at the end of `fd`; false with errno set when not.
bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

int OpenForAppend(const std::string& path, int extra_flags) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | extra_flags, 0644);
}

std::string Folder(const std::string& path) { return path.substr(0, path.find_last_of('/')); }

// Takes DIR/lock (holding this process's pid) for as long as the returned
// descriptor is open: two dispatchers on one work dir interleaved their
// entries in one journal and handed out the same ids, and a restart then
// replayed one's departures onto the other's jobs.
absl::StatusOr<int> LockWorkDir(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/lock");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io::ErrnoStatus(errno, "cannot open the work dir's lock", path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd, pid, sizeof(pid) - 1, 0);
    ::close(fd);
    if (error != EWOULDBLOCK) return io::ErrnoStatus(error, "cannot lock", path);
    const std::string holder = n > 0 ? absl::StrCat(" (pid ", absl::StripAsciiWhitespace(pid), ")") : "";
    return absl::FailedPreconditionError(absl::StrCat("work dir ", dir, " is in use by another dispatcher", holder,
                                                      ": give each dispatcher a --work-dir of its own"));
  }
  const std::string mine = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, mine.data(), mine.size(), 0) != static_cast<ssize_t>(mine.size())) {
    const int error = errno;
    ::close(fd);
    return io::ErrnoStatus(error, "cannot write", path);
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& dir, Options options,
                                                       std::vector<JournalEntry>* replay, std::string* warning) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return io::ErrnoStatus(errno, "cannot create work dir", dir);
  }
  SLUICE_ASSIGN_OR_RETURN(const int lock_fd, LockWorkDir(dir));
  const auto fail = [lock_fd](absl::Status error) {
    ::close(lock_fd);
    return error;
  };
  const std::string path = absl::StrCat(dir, "/journal.tfrecord");
  absl::StatusOr<uint64_t> good_bytes = ReadEntries(path, replay, warning);
  if (!good_bytes.ok()) return fail(good_bytes.status());
  if (!warning->empty() && ::truncate(path.c_str(), static_cast<off_t>(*good_bytes)) != 0) {
    return fail(io::ErrnoStatus(errno, "cannot cut the torn tail of", path));
  }
  const int fd = OpenForAppend(path, 0);
  if (fd < 0) return fail(io::ErrnoStatus(errno, "cannot open the journal", path));
  return std::unique_ptr<Journal>(new Journal(path, options, fd, lock_fd, *good_bytes));
}

Journal::Journal(std::string path, Options options, int fd, int lock_fd, uint64_t bytes)
    : path_(std::move(path)),
      options_(options),
      lock_fd_(lock_fd),
      fd_(fd),
      bytes_(bytes),
      compact_at_(options.compact_bytes) {}

Journal::~Journal() {
  absl::MutexLock lock(&mu_);
  ::close(fd_);
  ::close(lock_fd_);
}

absl::Status Journal::Failed(absl::Status error) {
  failed_ = absl::UnavailableError(
      absl::StrCat(error.message(),
                   ": the dispatcher accepts no work it cannot journal until it is restarted (with the same "
                   "--work-dir, once the disk is fixed)"));
  return failed_;
}

absl::StatusOr<uint64_t> Journal::Append(const JournalEntry& entry) {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  frame_.clear();
  io::AppendTfRecordFrame(entry.SerializeAsString(), &frame_);
  if (!WriteAll(fd_, frame_)) {
    const int err = errno;
    // A partial frame would replay as a torn tail; cut it now, so the file
    // holds exactly the entries that were written whole.
    (void)::ftruncate(fd_, static_cast<off_t>(bytes_));
    return Failed(io::ErrnoStatus(err, "cannot write the journal", path_));
  }
  bytes_ += frame_.size();
  return ++appended_;
}

absl::Status Journal::Sync(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  while (failed_.ok() && synced_ < seq && syncing_) synced_cv_.Wait(&mu_);
  if (!failed_.ok()) return failed_;
  if (synced_ >= seq) return absl::OkStatus();
  // This caller syncs for everyone written so far; later ones wait on it.
  syncing_ = true;
  const uint64_t covered = appended_;
  const int fd = fd_;
  mu_.Unlock();
  const int rc = ::fdatasync(fd);
  const int err = errno;
  mu_.Lock();
  syncing_ = false;
  synced_cv_.SignalAll();
  // After a failed fdatasync the kernel may have dropped the dirty pages:
  // nothing written since the last good sync can be trusted on disk.
  if (rc != 0) return Failed(io::ErrnoStatus(err, "cannot sync the journal", path_));
  synced_ = std::max(synced_, covered);
  return absl::OkStatus();
}

uint64_t Journal::appended() const {
  absl::MutexLock lock(&mu_);
  return appended_;
}

uint64_t Journal::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

bool Journal::wants_compaction() const {
  absl::MutexLock lock(&mu_);
  return failed_.ok() && bytes_ > compact_at_;
}

absl::Status Journal::Compact(const std::vector<JournalEntry>& snapshot) {
  absl::MutexLock lock(&mu_);
  while (syncing_) synced_cv_.Wait(&mu_);
  if (!failed_.ok()) return failed_;
  std::string bytes;
  for (const JournalEntry& entry : snapshot) io::AppendTfRecordFrame(entry.SerializeAsString(), &bytes);
  const std::string next = path_ + ".compacting";
  const int fd = OpenForAppend(next, O_TRUNC);
  const bool written = fd >= 0 && WriteAll(fd, bytes) && ::fdatasync(fd) == 0;
  const int err = errno;
  if (!written) {
    // The journal itself is intact: keep it, and try again only once it has
    // doubled, not on every entry.
    if (fd >= 0) ::close(fd);
    ::unlink(next.c_str());
    compact_at_ = 2 * bytes_;
    return io::ErrnoStatus(err, "cannot compact the journal into", next);
  }
  // The rename is the switch: a crash before it leaves the old journal.
  if (::rename(next.c_str(), path_.c_str()) != 0) {
    const int rename_err = errno;
    ::close(fd);
    ::unlink(next.c_str());
    compact_at_ = 2 * bytes_;
    return io::ErrnoStatus(rename_err, "cannot put the compacted journal in place at", path_);
  }
  ::close(fd_);
  fd_ = fd;
  bytes_ = bytes.size();
  synced_ = appended_;  // the snapshot holds every entry's effect, synced
  compact_at_ = std::max(options_.compact_bytes, 2 * bytes_);
  // Until the folder is synced, the rename itself may not survive a crash.
  const int dir = ::open(Folder(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool synced = dir >= 0 && ::fsync(dir) == 0;
  const int dir_err = errno;
  if (dir >= 0) ::close(dir);
  if (!synced) return Failed(io::ErrnoStatus(dir_err, "cannot sync the folder of", path_));
  return absl::OkStatus();
}

}  // namespace sluice::service
