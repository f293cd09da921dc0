#include "sluice/profile/staged_directory.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sluice::profile {

absl::StatusOr<StagedDirectory> StagedDirectory::Create(const std::string& dir) {
  const std::string staging = absl::StrCat(dir, "/.staging-", getpid());
  std::error_code ec;
  std::filesystem::remove_all(staging, ec);  // a killed run's of this pid
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
  for (const std::string& name : names) {
    std::filesystem::rename(staging_ + "/" + name, Final(name), ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot move ", name, " into ", dir_, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace sluice::profile
