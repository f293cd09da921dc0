// An object's URL, scheme://bucket/key?options, as sluice reads and writes
// it. A key's '?' would start the options, so the URLs sluice makes (from
// a listing) write it %3F, and a key's '%' %25; those two escapes, and only
// they, are read back in a URL's key (any other '%' is itself).
#ifndef SLUICE_IO_OBJECT_URL_H_
#define SLUICE_IO_OBJECT_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::io {

// scheme://bucket/key?query, split. The query holds Arrow's per-URL
// options (endpoint_override, scheme, region, anonymous, ...).
struct ObjectUrl {
  std::string scheme, bucket, key, query;

  // The URL of `bucket_and_key` (a path, as a listing gives it) with this
  // URL's scheme and options.
  std::string Url(absl::string_view bucket_and_key) const;
  std::string Path() const { return key.empty() ? bucket : bucket + "/" + key; }
};

// How a URL's key is read: as the object's own name, or as a glob pattern
// (where an escaped '?' stays literal: "\?").
enum class KeyAs { kName, kPattern };

// Splits and checks `url`: InvalidArgument for a URL that carries
// credentials, an option the store does not take (named without its
// value), or no bucket.
absl::StatusOr<ObjectUrl> ParseObjectUrl(const std::string& url, KeyAs key_as = KeyAs::kName);

// Where `key`'s first glob wildcard is, passing over those escaped with
// '\'; npos if none.
size_t FirstWildcard(const std::string& key);
// `key` without its wildcards' escapes.
std::string Unescaped(const std::string& key);

}  // namespace sluice::io

#endif  // SLUICE_IO_OBJECT_URL_H_
