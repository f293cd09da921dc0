#include "sluice/placement/kept_prefix.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

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

// Removes what processes killed before they could left: directories
// named for a process that no longer runs.
void RemoveStale(const std::string& root) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    if (name.rfind(kPrefix, 0) != 0 || std::sscanf(name.c_str() + sizeof(kPrefix) - 1, "%d-", &pid) != 1) continue;
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) std::filesystem::remove_all(entry.path(), ec);
  }
}

// A directory of its own under the temporary directory, named for this
// process.
absl::StatusOr<std::string> MakeDirectory() {
  const std::string root = TempRoot();
  RemoveStale(root);
  std::string pattern = absl::StrFormat("%s/%s%d-XXXXXX", root, kPrefix, getpid());
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot create a directory under %s: %s", root, std::strerror(errno)));
  }
  return pattern;
}

}  // namespace

bool KeptPrefix::Keepable(const PipelineDef& def, const graph::CompiledPipeline& compiled) {
  for (const NodeDef& n : def.nodes()) {
    if (n.has_distribute()) return false;
  }
  return profile::MaterializableMaps(compiled) > 0;
}

int64_t KeptPrefix::Room() {
  struct statvfs fs{};
  if (statvfs(TempRoot().c_str(), &fs) != 0) return 0;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

KeptPrefix::~KeptPrefix() {
  stop_.store(true);
  if (writer_.joinable()) writer_.join();
  absl::MutexLock lock(&mu_);
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

void KeptPrefix::Start() {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kIdle) return;
  state_ = State::kWriting;
  writer_ = std::thread([this] { Write(); });
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
  absl::StatusOr<std::string> dir = MakeDirectory();
  if (!dir.ok()) return dir.status();
  {
    absl::MutexLock lock(&mu_);
    dir_ = *dir;
  }
  // One thread: the running epoch and the trainer keep the rest.
  return profile::Materialize(Variant(def_, Placement()), *dir, [](int64_t) {}, &stop_);
}

}  // namespace sluice::placement
