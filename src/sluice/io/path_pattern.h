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

// `pattern`'s brace expressions expanded as bash and the webdataset
// library's braceexpand expand them, in their order: `{a,b}` each
// alternative, `{000..099}` and `{0..9..2}` numbers (zero-padded to the
// wider end's width when either end has a leading zero), `{a..e}` letters,
// nested ones too. A brace that is no such expression (`{x}`), or is
// escaped (`\{`), stays as it is. InvalidArgument past 1,000,000 names.
absl::StatusOr<std::vector<std::string>> ExpandBraces(const std::string& pattern);

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
