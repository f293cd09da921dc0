#include "sluice/io/file_split.h"

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/object_store.h"
#include "sluice/io/path_pattern.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {
namespace {

// The folder glob() could not read, and why: its callback takes no user
// data, and each thread expands its own patterns.
struct GlobError {
  std::string path;
  int err = 0;
};
thread_local GlobError glob_error;

int OnGlobError(const char* path, int err) {
  glob_error = GlobError{path, err};
  return 1;  // stop: GLOB_ERR asks for it anyway
}

// A URL of a scheme no source reads (https://, a presigned URL; S3:// in
// capitals), refused rather than looked for as a local path: named without
// its query, which may hold a signature.
std::optional<absl::Status> UnreadableUrl(const std::string& pattern) {
  const size_t colon = pattern.find("://");
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  const std::string scheme = pattern.substr(0, colon);
  if (!std::all_of(scheme.begin(), scheme.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); })) {
    return std::nullopt;
  }
  std::string shown = pattern.substr(0, pattern.find('?'));
  // user:password@ before the host is a secret too.
  const size_t host = colon + 3, at = shown.find('@', host);
  if (at != std::string::npos && at < shown.find('/', host)) shown = shown.substr(0, host) + "…" + shown.substr(at);
  const std::string lower = absl::AsciiStrToLower(scheme);
  const bool capitals = lower != scheme && IsObjectUrl(lower + "://");
  return absl::InvalidArgumentError(absl::StrCat(
      "'", shown, pattern.size() > shown.size() ? "?…'" : "'", ": ",
      capitals ? absl::StrCat("a URL's scheme is written in lower case (", lower, "://)")
               : absl::StrCat("sources read local paths and s3:// and gs:// URLs, not ", scheme, "://",
                              lower == "http" || lower == "https"
                                  ? " (download the files first; for a presigned URL, give the object's s3:// URL "
                                    "and its credentials)"
                                  : "")));
}

// For a local path not found that reads like a mistyped object URL
// (s3:/bucket/key, gs:bucket/key): how to write one.
std::string MistypedUrlHint(const std::string& pattern) {
  for (const char* scheme : {"s3:", "gs:"}) {
    if (absl::StartsWithIgnoreCase(pattern, scheme)) {
      return absl::StrCat(" (an object's URL is written ", scheme, "//bucket/key)");
    }
  }
  return "";
}

// For a pattern that matched nothing: a mistyped URL's form, or where a
// relative one was looked for.
std::string MissingPathHint(const std::string& pattern) {
  const std::string mistyped = MistypedUrlHint(pattern);
  return mistyped.empty() ? RelativePathHint(pattern) : mistyped;
}

// `sluice index` writes F.index beside F: a pattern matching both (a
// folder's *) means F, whose index is found beside it, not the index as
// data.
void DropSiblingIndexes(std::vector<std::string>* matches) {
  const std::vector<std::string> all = *matches;
  matches->erase(std::remove_if(matches->begin(), matches->end(),
                                [&](const std::string& f) {
                                  return absl::EndsWith(f, ".index") &&
                                         std::binary_search(all.begin(), all.end(), f.substr(0, f.size() - 6));
                                }),
                 matches->end());
}

// Appends the files `pattern` (no braces left) names, in order, each
// glob's matches sorted. `given`: the pattern as the user wrote it, for
// messages.
absl::Status AppendMatches(const std::string& pattern, const std::string& given, std::vector<std::string>* files) {
  const std::string from = pattern == given ? "" : absl::StrCat(" (from '", given, "')");
  if (IsObjectUrl(pattern)) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> objects, ListObjects(pattern));
    files->insert(files->end(), objects.begin(), objects.end());
    return absl::OkStatus();
  }
  if (HasRecursiveWildcard(pattern)) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> matches, MatchLocalFiles(pattern));
    if (matches.empty()) {
      return absl::NotFoundError(
          absl::StrCat("no file matches pattern '", pattern, "'", from, MissingPathHint(pattern)));
    }
    DropSiblingIndexes(&matches);
    files->insert(files->end(), matches.begin(), matches.end());
    return absl::OkStatus();
  }
  glob_t g{};
  glob_error = GlobError{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, OnGlobError, &g);
  if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
    ::globfree(&g);
    const bool is_pattern = pattern.find_first_of("*?[") != std::string::npos;
    return absl::NotFoundError(absl::StrCat(is_pattern ? "no file matches pattern '" : "file not found: '", pattern,
                                            "'", from, MissingPathHint(pattern)));
  }
  if (rc != 0) {
    ::globfree(&g);
    if (glob_error.err == 0) return absl::UnknownError(absl::StrCat("cannot expand pattern '", pattern, "'"));
    const absl::Status folder = ErrnoStatus(glob_error.err, "cannot read folder", glob_error.path);
    return absl::Status(folder.code(), absl::StrCat("no file matches pattern '", pattern, "'", from, ": ",
                                                    folder.message(), MistypedUrlHint(pattern)));
  }
  std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  std::sort(matches.begin(), matches.end());
  DropSiblingIndexes(&matches);
  files->insert(files->end(), matches.begin(), matches.end());
  return absl::OkStatus();
}

// `pattern` without a file: URL's scheme (file:///abs/x.tar, file:x.tar, as
// the webdataset library takes them); pipe: URLs refused.
absl::StatusOr<std::string> LocalPattern(const std::string& pattern) {
  if (absl::StartsWith(pattern, "pipe:")) {
    // Not echoed: a command may hold a token.
    return absl::InvalidArgumentError(
        "'pipe:…': sources read files and s3:// and gs:// objects, not a command's output (the webdataset "
        "library's pipe: URLs): give the shards' paths or URLs, braces and globs allowed "
        "(s3://bucket/train-{000000..000099}.tar)");
  }
  if (absl::StartsWith(pattern, "file:///")) return pattern.substr(7);
  if (absl::StartsWith(pattern, "file://")) {
    return absl::InvalidArgumentError(absl::StrCat("'", pattern,
                                                   "': a file: URL names a local path "
                                                   "(file:///abs/path or file:rel/path), not a host"));
  }
  if (absl::StartsWith(pattern, "file:")) return pattern.substr(5);
  return pattern;
}

// The names `pattern` stands for: its braces expanded (an object URL's
// before its query).
absl::StatusOr<std::vector<std::string>> BraceNames(const std::string& pattern) {
  const size_t query = IsObjectUrl(pattern) ? std::min(pattern.find('?'), pattern.size()) : pattern.size();
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandBraces(pattern.substr(0, query)));
  for (std::string& name : names) name += pattern.substr(query);
  return names;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandFilePatterns(const std::vector<std::string>& patterns) {
  if (patterns.empty()) return absl::InvalidArgumentError("no files given");
  std::vector<std::string> files;
  for (const std::string& given : patterns) {
    std::error_code missing;
    if (!IsObjectUrl(given) && std::filesystem::exists(given, missing)) {
      // A file of that very name ("pipe:x", "a{1,2}.tar") is itself.
      SLUICE_RETURN_IF_ERROR(AppendMatches(GlobEscape(given), GlobEscape(given), &files));
      continue;
    }
    if (!IsObjectUrl(given) && !absl::StartsWith(given, "file:")) {
      if (std::optional<absl::Status> refused = UnreadableUrl(given)) return *refused;
    }
    SLUICE_ASSIGN_OR_RETURN(const std::string pattern, LocalPattern(given));
    if (pattern != given && std::filesystem::exists(pattern, missing)) {
      SLUICE_RETURN_IF_ERROR(AppendMatches(GlobEscape(pattern), GlobEscape(pattern), &files));
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(const std::vector<std::string> names, BraceNames(pattern));
    for (const std::string& name : names) SLUICE_RETURN_IF_ERROR(AppendMatches(name, given, &files));
  }
  return files;
}

std::string GlobEscape(const std::string& path) {
  // An object URL's '?' starts its query, which is taken as it is.
  const size_t end = IsObjectUrl(path) ? std::min(path.find('?'), path.size()) : path.size();
  std::string out;
  for (size_t i = 0; i < end; ++i) {
    const char c = path[i];
    if (c == '*' || c == '?' || c == '[' || c == '{' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + path.substr(end);
}

std::vector<Split> MakeRecordSplits(const std::vector<int64_t>& records_per_file, int64_t split_records) {
  std::vector<Split> splits;
  for (size_t f = 0; f < records_per_file.size(); ++f) {
    const int64_t n = records_per_file[f];
    if (split_records <= 0 || n <= split_records) {
      splits.push_back(Split{static_cast<int32_t>(f), 0, n});
      continue;
    }
    for (int64_t b = 0; b < n; b += split_records) {
      splits.push_back(Split{static_cast<int32_t>(f), b, std::min(n, b + split_records)});
    }
  }
  return splits;
}

}  // namespace sluice::io
