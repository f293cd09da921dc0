#include "sluice/io/staged_directory.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::io {

namespace {

constexpr char kStaging[] = ".staging-";

// Staging folders of runs whose process is gone (killed before it could
// remove its own).
void RemoveAbandoned(const std::string& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> abandoned;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, kStaging)) continue;
    const std::string rest = name.substr(sizeof(kStaging) - 1);
    int pid = 0;
    if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid)) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) abandoned.push_back(entry.path());
  }
  for (const std::filesystem::path& path : abandoned) std::filesystem::remove_all(path, ec);
}

}  // namespace

absl::StatusOr<StagedDirectory> StagedDirectory::Create(const std::string& dir) {
  static std::atomic<int> runs{0};  // two runs of one process, into one folder, apart
  const std::string staging = absl::StrCat(dir, "/", kStaging, getpid(), "-", runs.fetch_add(1));
  std::error_code ec;
  RemoveAbandoned(dir);
  std::filesystem::create_directories(staging, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", staging, ": ", ec.message()));
  return StagedDirectory(dir, staging);
}

StagedDirectory::StagedDirectory(StagedDirectory&& other) noexcept
    : dir_(std::move(other.dir_)), staging_(std::exchange(other.staging_, "")) {}

StagedDirectory::~StagedDirectory() {
  if (staging_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(staging_, ec);
}

absl::Status StagedDirectory::Commit(const std::string& last) {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(staging_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != last) names.push_back(name);
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", staging_, ": ", ec.message()));
  names.push_back(last);
  // The old `last` goes first: a move that fails halfway leaves no file
  // naming a mix of old and new ones.
  std::filesystem::remove(Final(last), ec);
  for (const std::string& name : names) {
    std::filesystem::rename(staging_ + "/" + name, Final(name), ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot move ", name, " into ", dir_, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace sluice::io
