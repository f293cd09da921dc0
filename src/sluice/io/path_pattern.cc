#include "sluice/io/path_pattern.h"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sluice/io/object_url.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {
namespace {

namespace fs = std::filesystem;

// Hidden names (a leading '.') match only a pattern that starts with one,
// and `**` passes through no hidden folder, as glob(3) and Python's glob
// have it: `data/**/*.parquet` reads no .ipynb_checkpoints copies.
bool Matches(const std::vector<std::string>& pattern, size_t p, const std::vector<std::string>& path, size_t s) {
  if (p == pattern.size()) return s == path.size();
  if (pattern[p] == "**") {
    for (size_t rest = s; rest <= path.size(); ++rest) {
      if (Matches(pattern, p + 1, path, rest)) return true;
      if (rest < path.size() && !path[rest].empty() && path[rest][0] == '.') return false;
    }
    return false;
  }
  return s < path.size() && ::fnmatch(pattern[p].c_str(), path[s].c_str(), FNM_PERIOD) == 0 &&
         Matches(pattern, p + 1, path, s + 1);
}

}  // namespace

bool HasRecursiveWildcard(absl::string_view pattern) {
  for (absl::string_view part : absl::StrSplit(pattern, '/')) {
    if (part == "**") return true;
  }
  return false;
}

bool PathMatches(absl::string_view pattern, absl::string_view path) {
  return Matches(absl::StrSplit(pattern, '/'), 0, absl::StrSplit(path, '/'), 0);
}

absl::StatusOr<std::vector<std::string>> MatchLocalFiles(const std::string& pattern) {
  // The folders before the first component with a wildcard.
  std::vector<std::string> parts = absl::StrSplit(pattern, '/');
  size_t literal = 0;
  while (literal + 1 < parts.size() && FirstWildcard(parts[literal]) == std::string::npos) ++literal;
  for (size_t i = 0; i < literal; ++i) parts[i] = Unescaped(parts[i]);
  std::string base = absl::StrJoin(parts.begin(), parts.begin() + literal, "/");
  const bool relative = literal == 0;  // walked from "." and matched without its "./"
  if (relative) base = ".";
  if (literal == 1 && parts[0].empty()) base = "/";  // "/**/...": walked from the root
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(base, ec);
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) return files;
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type;
    if (!it->is_regular_file(type)) continue;
    std::string path = it->path().string();
    if (relative) path = path.substr(2);  // "./"
    if (PathMatches(pattern, path)) files.push_back(std::move(path));
  }
  if (ec) return ErrnoStatus(ec.value(), "cannot read a folder under", base);
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace sluice::io
