// Glob patterns of paths with `**`: a whole component that stands for any
// number of folders, none included, as Python's glob(recursive=True),
// fsspec and shells with globstar take it. glob(3) and fnmatch(3) take it
// for `*`, one folder, and missed the files above and below it.
#ifndef SLUICE_IO_PATH_PATTERN_H_
#define SLUICE_IO_PATH_PATTERN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::io {

// Whether `pattern` has a `**` component.
bool HasRecursiveWildcard(absl::string_view pattern);

// Whether `path` matches `pattern` component by component: fnmatch(3)'s
// wildcards within a component ('*', '?', [...], '\' escapes), `**` for
// any number of them.
bool PathMatches(absl::string_view pattern, absl::string_view path);

// The local files that match `pattern` (with a `**`), sorted: the folder
// before its first wildcard walked to any depth (links to folders are not
// followed: a loop would never end). Empty when none does.
absl::StatusOr<std::vector<std::string>> MatchLocalFiles(const std::string& pattern);

}  // namespace sluice::io

#endif  // SLUICE_IO_PATH_PATTERN_H_
