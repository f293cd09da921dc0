#include "sluice/datagen/older_files.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace sluice::datagen {

absl::Status RefuseOlderFiles(const std::string& dir, const std::function<bool(const std::string&)>& ours,
                              const std::function<bool(const std::string&)>& written) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::recursive_directory_iterator it(dir, error), end;
  int64_t older = 0;
  std::string example;
  for (; !error && it != end; it.increment(error)) {
    if (it.depth() >= 1) it.disable_recursion_pending();  // class folders hold files, no folders
    if (!it->is_regular_file(error)) continue;
    const std::string name = it->path().lexically_relative(dir).generic_string();
    if (!ours(name) || written(name)) continue;
    if (older++ == 0) example = it->path().string();
  }
  if (older == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(dir, " holds ", older, " file(s) of an earlier make-data that this one would not replace (", example,
                   "): readers of the folder would mix the two datasets. Remove them, or write into another --out"));
}

}  // namespace sluice::datagen
