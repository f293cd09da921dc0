#include "sluice/placement/kept_prefix.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sluice/exec/node_stats.h"
#include "sluice/placement/variant.h"

namespace sluice::placement {
namespace {

std::string TempRoot() {
  std::error_code ec;
  std::filesystem::path root = std::filesystem::temp_directory_path(ec);
  return ec ? "/tmp" : root.string();
}

constexpr char kPrefix[] = "sluice-prefix-";

// `dir` locked for as long as the returned descriptor is open (-1: could
// not be): a process holds its kept prefix's lock while it lives, in any
// PID namespace that shares the directory.
int LockDirectory(const std::string& dir, bool wait) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int locked;
  do {
    locked = flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
  } while (locked != 0 && errno == EINTR);
  if (locked == 0) return fd;
  close(fd);
  return -1;
}

// Removes what processes killed before they could left: directories no
// process holds the lock of (a minute after they were last written, past
// a new one's moment between its creation and its lock).
void RemoveStale(const std::string& root) {
  std::error_code ec;
  const auto recent = std::filesystem::file_time_type::clock::now() - std::chrono::minutes(1);
  for (auto it = std::filesystem::directory_iterator(root, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::filesystem::path path = it->path();
    std::error_code time_ec;
    if (path.filename().string().rfind(kPrefix, 0) != 0 || std::filesystem::last_write_time(path, time_ec) > recent ||
        time_ec) {
      continue;
    }
    const int lock = LockDirectory(path.string(), false);
    if (lock < 0) continue;
    std::error_code remove_ec;
    std::filesystem::remove_all(path, remove_ec);
    close(lock);
  }
}

// A directory of its own under the temporary directory, named for this
// process and locked (the descriptor returned beside it).
absl::StatusOr<std::pair<std::string, int>> MakeDirectory() {
  const std::string root = TempRoot();
  RemoveStale(root);
  std::string pattern = absl::StrFormat("%s/%s%d-XXXXXX", root, kPrefix, getpid());
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot create a directory under %s: %s", root, std::strerror(errno)));
  }
  return std::make_pair(pattern, LockDirectory(pattern, true));
}

}  // namespace

int KeptPrefix::Maps(const PipelineDef& def, const graph::CompiledPipeline& compiled) {
  // Data this process holds, or a Python dataset's items (which may draw
  // numbers of their own), is not read again from files.
  const SourceDef& source = def.nodes(0).source();
  if (source.has_python_dataset() || source.has_arrow_memory() || source.has_arrays()) return 0;
  for (const NodeDef& n : def.nodes()) {
    if (n.has_distribute()) return 0;
  }
  return profile::MaterializableMaps(def, compiled);
}

int64_t KeptPrefix::Room() {
  struct statvfs fs{};
  if (statvfs(TempRoot().c_str(), &fs) != 0) return 0;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

KeptPrefix::KeptPrefix(PipelineDef def, int maps) : def_(std::move(def)), maps_(maps) {
  // The prefix's own output, not the node it ends in: the compiler may
  // fuse its last map with the next (W2's uint8 rows into float32 ones).
  PipelineDef prefix = def_;
  prefix.mutable_nodes()->DeleteSubrange(maps_ + 1, prefix.nodes_size() - maps_ - 1);
  absl::StatusOr<graph::CompiledPipeline> compiled = graph::Compile(prefix);
  if (!compiled.ok()) return;
  for (const ColumnSpec& c : compiled->output_schema().columns()) {
    if (c.ragged) return;
  }
  row_bytes_ = compiled->output_schema().RowBytes();
}

KeptPrefix::~KeptPrefix() {
  stop_.store(true);
  if (writer_.joinable()) writer_.join();
  absl::MutexLock lock(&mu_);
  Remove();
}

void KeptPrefix::Remove() {
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  if (lock_fd_ >= 0) close(lock_fd_);
  dir_.clear();
  lock_fd_ = -1;
}

void KeptPrefix::Start() {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kIdle) return;
  state_ = State::kWriting;
  try {
    writer_ = std::thread([this] { Write(); });
  } catch (const std::system_error& e) {
    state_ = State::kFailed;
    summary_ = absl::StrFormat("the deterministic prefix could not be kept: no thread to write it (%s)", e.what());
  }
}

KeptPrefix::State KeptPrefix::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

void KeptPrefix::Wait() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(+[](const State* s) { return *s != State::kWriting; }, &state_));
}

std::string KeptPrefix::summary() const {
  absl::MutexLock lock(&mu_);
  return summary_;
}

void KeptPrefix::Write() {
  const int64_t start = exec::NowNs();
  absl::StatusOr<profile::MaterializeResult> written = Materialize();
  absl::MutexLock lock(&mu_);
  if (!written.ok()) {
    Remove();  // what was written so far: a full disk stays full otherwise
    state_ = State::kFailed;
    summary_ = absl::StrFormat("the deterministic prefix could not be kept: %s", written.status().message());
    return;
  }
  rewritten_ = written->rewritten;
  summary_ = absl::StrFormat("the deterministic prefix (%s) kept: %d records, %.1f MB under %s, written in %.1f s",
                             absl::StrJoin(written->ops, ", "), written->records, written->bytes / 1e6, dir_,
                             (exec::NowNs() - start) * 1e-9);
  state_ = State::kReady;
}

absl::StatusOr<profile::MaterializeResult> KeptPrefix::Materialize() {
  absl::StatusOr<std::pair<std::string, int>> made = MakeDirectory();
  if (!made.ok()) return made.status();
  const std::string dir = made->first;
  {
    absl::MutexLock lock(&mu_);
    dir_ = dir;
    lock_fd_ = made->second;
  }
  // One thread: the running epoch and the trainer keep the rest.
  return profile::Materialize(Variant(def_, Placement()), dir, [](int64_t) {}, &stop_);
}

}  // namespace sluice::placement
