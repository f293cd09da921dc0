#include "sluice/io/path_pattern.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sluice/core/status_macros.h"
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

constexpr size_t kMaxBraceNames = 1'000'000;

// The '}' closing the '{' at `open`, skipping nested pairs and escapes;
// npos when none does.
size_t ClosingBrace(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '{') {
      ++depth;
    } else if (s[i] == '}' && --depth == 0) {
      return i;
    }
  }
  return std::string::npos;
}

// The alternatives of `{a,b,...}`'s inside, split at its top-level commas;
// fewer than two when it has none.
std::vector<std::string> Alternatives(const std::string& inside) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (size_t i = 0; i < inside.size(); ++i) {
    const char c = inside[i];
    if (c == '\\' && i + 1 < inside.size()) {
      parts.back() += inside.substr(i++, 2);
      continue;
    }
    depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (c == ',' && depth == 0) {
      parts.emplace_back();
    } else {
      parts.back().push_back(c);
    }
  }
  return parts;
}

// `{first..last[..step]}`'s names, numbers or letters; empty when `inside`
// is no sequence.
// A sequence's bound as bash reads it: digits after an optional sign (no
// spaces), short enough that no arithmetic on it overflows.
bool ReadBound(const std::string& text, int64_t* value) {
  const size_t digits = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (text.size() <= digits || text.size() > digits + 15) return false;
  for (size_t i = digits; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return absl::SimpleAtoi(text, value);
}

absl::StatusOr<std::vector<std::string>> Sequence(const std::string& inside) {
  const std::vector<std::string> ends = absl::StrSplit(inside, "..");
  if (ends.size() != 2 && ends.size() != 3) return std::vector<std::string>();
  int64_t step = 1;
  if (ends.size() == 3 && !ReadBound(ends[2], &step)) return std::vector<std::string>();
  step = std::max<int64_t>(std::abs(step), 1);  // bash takes a step of 0 as 1
  const auto letter = [](const std::string& e) {
    return e.size() == 1 && std::isalpha(static_cast<unsigned char>(e[0]));
  };
  int64_t first = 0, last = 0;
  size_t width = 0;
  if (letter(ends[0]) && letter(ends[1])) {
    first = ends[0][0], last = ends[1][0];
  } else if (ReadBound(ends[0], &first) && ReadBound(ends[1], &last)) {
    const auto padded = [](const std::string& e) {  // bash pads "-01", not "+01"
      const size_t digits = e[0] == '-' ? 1 : 0;
      return e[0] != '+' && e.size() > digits + 1 && e[digits] == '0';
    };
    if (padded(ends[0]) || padded(ends[1])) width = std::max(ends[0].size(), ends[1].size());
  } else {
    return std::vector<std::string>();
  }
  const uint64_t count = static_cast<uint64_t>(std::abs(last - first)) / static_cast<uint64_t>(step) + 1;
  if (count > kMaxBraceNames) {
    return absl::InvalidArgumentError(
        absl::StrCat("{", inside, "} stands for ", count, " names, more than ", kMaxBraceNames));
  }
  std::vector<std::string> names;
  for (int64_t v = first, i = 0; i < static_cast<int64_t>(count); ++i, v += first <= last ? step : -step) {
    if (letter(ends[0])) {
      names.emplace_back(1, static_cast<char>(v));
      continue;
    }
    std::string digits = std::to_string(std::abs(v));
    const size_t sign = v < 0 ? 1 : 0;
    if (digits.size() + sign < width) digits.insert(0, width - digits.size() - sign, '0');
    names.push_back((v < 0 ? "-" : "") + digits);
  }
  return names;
}

absl::Status ExpandFrom(const std::string& pattern, size_t from, std::vector<std::string>* out) {
  for (size_t open = from; open < pattern.size(); ++open) {
    if (pattern[open] == '\\') {
      ++open;
      continue;
    }
    if (pattern[open] != '{') continue;
    const size_t close = ClosingBrace(pattern, open);
    if (close == std::string::npos) continue;  // unclosed: a later brace may close
    const std::string inside = pattern.substr(open + 1, close - open - 1);
    std::vector<std::string> names = Alternatives(inside);
    if (names.size() < 2) {
      SLUICE_ASSIGN_OR_RETURN(names, Sequence(inside));
      if (names.empty()) continue;  // no expression: the brace as it is
    }
    const std::string before = pattern.substr(0, open), after = pattern.substr(close + 1);
    for (const std::string& name : names) {
      // The alternative's own braces are expanded, then the rest's.
      SLUICE_RETURN_IF_ERROR(ExpandFrom(before + name + after, open, out));
      if (out->size() > kMaxBraceNames) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", pattern, "' stands for more than ", kMaxBraceNames, " names"));
      }
    }
    return absl::OkStatus();
  }
  out->push_back(pattern);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandBraces(const std::string& pattern) {
  std::vector<std::string> out;
  SLUICE_RETURN_IF_ERROR(ExpandFrom(pattern, 0, &out));
  return out;
}

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
