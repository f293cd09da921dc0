#include "sluice/io/object_url.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sluice/core/status_macros.h"

namespace sluice::io {
namespace {

// `key` with its %3F and %25 read back ('?' escaped in a pattern).
std::string DecodedKey(absl::string_view key, KeyAs key_as) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    const absl::string_view next = key.substr(i, 3);
    if (next == "%25") {
      out.push_back('%');
      i += 2;
    } else if (absl::EqualsIgnoreCase(next, "%3F")) {
      out += key_as == KeyAs::kPattern ? "\\?" : "?";
      i += 2;
    } else {
      out.push_back(key[i]);
    }
  }
  return out;
}

// A query parameter that would hold a credential (Arrow's access_key,
// secret_key and session_token, a password, a presigned URL's signature).
bool NamesCredential(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const char* word : {"key", "secret", "token", "password", "credential", "signature"}) {
    if (absl::StrContains(lower, word)) return true;
  }
  return false;
}

// Whether an endpoint's value holds a user and password ("http://u:p@host",
// the '@' maybe escaped).
bool HoldsUserInfo(absl::string_view value) {
  return absl::StrContains(value, "@") || absl::StrContains(absl::AsciiStrToLower(value), "%40");
}

// The error for a URL of `scheme` that carries credentials, named by
// `where` (without them: a URL ends up in logs, errors, saved states and
// profiles), saying where that store's client takes them from.
absl::Status CarriesCredentials(const std::string& scheme, const std::string& where) {
  const char* instead =
      scheme == "gs" ? "the environment (GOOGLE_APPLICATION_CREDENTIALS, a service account's key file) or the "
                       "machine's service account"
                     : "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), a profile file or the machine's "
                       "role";
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": a URL must not carry credentials; give them through ", instead));
}

// The URL options the stores' clients take (Arrow's S3Options and
// GcsOptions::FromUri, less the credentials), and `anonymous`.
constexpr const char* kS3Options[] = {
    "region",           "scheme",          "endpoint_override",       "allow_bucket_creation", "allow_bucket_deletion",
    "tls_ca_file_path", "tls_ca_dir_path", "tls_verify_certificates", "allow_delayed_open",    "smart_defaults",
    "anonymous"};
constexpr const char* kGcsOptions[] = {"scheme", "endpoint_override", "retry_limit_seconds", "location", "anonymous"};

// InvalidArgument for a query parameter that is not such an option, named
// without its value (a presigned URL's signature, a token under a name of
// its own); also for a key's '?' meant as a wildcard, which starts the
// query instead.
absl::Status CheckOption(const ObjectUrl& u, absl::string_view param) {
  const size_t equals = param.find('=');
  const absl::string_view name = param.substr(0, equals);
  if (NamesCredential(name)) {
    // Named where a value follows it; a parameter without one may be the
    // secret itself.
    return CarriesCredentials(
        u.scheme, absl::StrCat(u.scheme, "://", u.Path(), "?… (",
                               equals == absl::string_view::npos ? "a parameter without a value"
                                                                 : absl::StrCat("its parameter '", name, "'"),
                               ")"));
  }
  if (name == "endpoint_override" && equals != absl::string_view::npos && HoldsUserInfo(param.substr(equals + 1))) {
    return CarriesCredentials(
        u.scheme,
        absl::StrCat(u.scheme, "://", u.Path(), "?… (its parameter 'endpoint_override' holds a user and password)"));
  }
  const bool s3 = u.scheme == "s3";
  const auto* begin = s3 ? std::begin(kS3Options) : std::begin(kGcsOptions);
  const auto* end = s3 ? std::end(kS3Options) : std::end(kGcsOptions);
  if (name == "anonymous" && param != "anonymous=true" && param != "anonymous=false") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", u.scheme, "://", u.Path(), "?", param, "': anonymous is true or false"));
  }
  if (param.find('=') != absl::string_view::npos && std::find(begin, end, name) != end) return absl::OkStatus();
  if (param.find('=') == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", u.scheme, "://", u.Path(),
                                                   "?…': '?' starts an object URL's options (name=value); a key's "
                                                   "wildcard for one character is written [...] (or *), a key's own "
                                                   "'?' %3F"));
  }
  std::vector<std::string> names(begin, end);
  return absl::InvalidArgumentError(
      absl::StrCat("'", u.scheme, "://", u.Path(), "?…': '", name,
                   "' is not an option of the store (its value is not shown); options: ", absl::StrJoin(names, ", ")));
}

}  // namespace

std::string ObjectUrl::Url(absl::string_view bucket_and_key) const {
  std::string out = absl::StrCat(scheme, "://");
  for (const char c : bucket_and_key) {
    if (c == '%') {
      out += "%25";
    } else if (c == '?') {
      out += "%3F";
    } else {
      out.push_back(c);
    }
  }
  if (!query.empty()) absl::StrAppend(&out, "?", query);
  return out;
}

absl::StatusOr<ObjectUrl> ParseObjectUrl(const std::string& url, KeyAs key_as) {
  ObjectUrl u;
  const size_t colon = url.find("://");
  u.scheme = url.substr(0, colon);
  std::string rest = url.substr(colon + 3);
  if (const size_t q = rest.find('?'); q != std::string::npos) {
    u.query = rest.substr(q + 1);
    rest.resize(q);
  }
  const size_t slash = rest.find('/');
  u.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) u.key = DecodedKey(rest.substr(slash + 1), key_as);
  if (u.bucket.find('@') != std::string::npos) {
    // Named without what precedes the '@': that is the secret.
    return CarriesCredentials(u.scheme,
                              absl::StrCat(u.scheme, "://…@", u.bucket.substr(u.bucket.rfind('@') + 1), "/…"));
  }
  for (absl::string_view param : absl::StrSplit(u.query, '&', absl::SkipEmpty())) {
    SLUICE_RETURN_IF_ERROR(CheckOption(u, param));
  }
  if (u.bucket.empty() || u.bucket.find_first_of("*?[") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", url, "' names no bucket (wildcards go in the key only)"));
  }
  return u;
}

// Where `key`'s first wildcard is, passing over those escaped with '\\';
// npos if none.
size_t FirstWildcard(const std::string& key) {
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '\\') {
      ++i;
    } else if (key[i] == '*' || key[i] == '?' || key[i] == '[') {
      return i;
    }
  }
  return std::string::npos;
}

std::string Unescaped(const std::string& key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '\\' && i + 1 < key.size()) ++i;
    out.push_back(key[i]);
  }
  return out;
}

}  // namespace sluice::io
