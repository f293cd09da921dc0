#include "sluice/io/aws_config.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace sluice::io {
namespace {

// Section name -> key -> value. A property nested under a key whose value
// is empty (`s3 =` then indented lines) is "key.property".
using Sections = std::map<std::string, std::map<std::string, std::string>>;

// "[profile  dev]" and "[profile dev]" are one section.
std::string SectionName(absl::string_view header) {
  std::vector<absl::string_view> words = absl::StrSplit(header, ' ', absl::SkipWhitespace());
  return absl::StrJoin(words, " ");
}

Sections Parse(absl::string_view text) {
  Sections out;
  std::string section, parent;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = SectionName(line.substr(1, line.size() - 2));
      parent.clear();
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    const std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (indented && !parent.empty()) {
      out[section][absl::StrCat(parent, ".", key)] = value;
      continue;
    }
    parent = value.empty() ? key : "";
    out[section][key] = value;
  }
  return out;
}

std::string Lookup(const Sections& sections, const std::string& section, const std::string& key) {
  auto s = sections.find(section);
  if (s == sections.end()) return "";
  auto k = s->second.find(key);
  return k == s->second.end() ? "" : k->second;
}

bool Set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0';
}

}  // namespace

std::string ConfiguredS3Endpoint(absl::string_view config, absl::string_view profile) {
  const Sections sections = Parse(config);
  std::string section = absl::StrCat("profile ", profile);
  if (profile == "default" && sections.count(section) == 0) section = "default";
  if (sections.count(section) == 0) return "";
  if (absl::EqualsIgnoreCase(Lookup(sections, section, "ignore_configured_endpoint_urls"), "true")) return "";
  if (const std::string services = Lookup(sections, section, "services"); !services.empty()) {
    std::string endpoint = Lookup(sections, absl::StrCat("services ", services), "s3.endpoint_url");
    if (!endpoint.empty()) return endpoint;
  }
  return Lookup(sections, section, "endpoint_url");
}

std::string ConfiguredS3EndpointOfThisProcess() {
  if (Set("AWS_ENDPOINT_URL_S3") || Set("AWS_ENDPOINT_URL")) return "";
  if (const char* ignore = std::getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
      ignore != nullptr && absl::EqualsIgnoreCase(ignore, "true")) {
    return "";
  }
  std::string path;
  if (Set("AWS_CONFIG_FILE")) {
    path = std::getenv("AWS_CONFIG_FILE");
  } else if (Set("HOME")) {
    path = absl::StrCat(std::getenv("HOME"), "/.aws/config");
  } else {
    return "";
  }
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  const char* profile = Set("AWS_PROFILE")           ? std::getenv("AWS_PROFILE")
                        : Set("AWS_DEFAULT_PROFILE") ? std::getenv("AWS_DEFAULT_PROFILE")
                                                     : "default";
  return ConfiguredS3Endpoint(text.str(), profile);
}

}  // namespace sluice::io
