// Files written into a hidden folder and moved into their folder only once
// all of them are whole.
#ifndef SLUICE_IO_STAGED_DIRECTORY_H_
#define SLUICE_IO_STAGED_DIRECTORY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::io {

// A run that fails or is stopped (Ctrl-C) leaves what `dir` held before,
// say a good earlier materialization whose pipeline.json names its files,
// as it was: the new files are written into `dir`/.staging-<pid>-<n> and
// renamed into `dir` by Commit, the file the others are found by last
// (removed first). A staging folder whose process is gone is removed by
// the next run into `dir`.
class StagedDirectory {
 public:
  static absl::StatusOr<StagedDirectory> Create(const std::string& dir);
  StagedDirectory(StagedDirectory&& other) noexcept;
  StagedDirectory& operator=(StagedDirectory&&) = delete;
  ~StagedDirectory();  // removes the staging folder and what is left in it

  // Where to write the files.
  const std::string& staging() const { return staging_; }
  // Where file `name` of the staging folder lies once committed.
  std::string Final(const std::string& name) const { return dir_ + "/" + name; }
  // Renames every file of the staging folder into `dir`, `last` last.
  absl::Status Commit(const std::string& last);

 private:
  StagedDirectory(std::string dir, std::string staging) : dir_(std::move(dir)), staging_(std::move(staging)) {}

  std::string dir_;
  std::string staging_;  // empty once moved from
};

}  // namespace sluice::io

#endif  // SLUICE_IO_STAGED_DIRECTORY_H_
