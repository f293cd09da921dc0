// What a listing said of each object it found: its length and when it was
// last written. An object is opened long after its glob was listed (at the
// job's start, maybe by the service's dispatcher); comparing what the store
// says then with what the listing said finds objects rewritten in between,
// which would otherwise be read as a mix of two versions.
#ifndef SLUICE_IO_OBJECT_LISTING_H_
#define SLUICE_IO_OBJECT_LISTING_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sluice::io {

struct ObjectVersion {
  int64_t size = 0;
  int64_t modified_s = 0;  // seconds since the epoch; 0: the store did not say

  bool operator==(const ObjectVersion& o) const { return size == o.size && modified_s == o.modified_s; }
};

// Records what the latest listing of `url` said. Process-wide, one entry
// (about 40 bytes) per object listed, replaced by a later listing.
void RememberListed(const std::string& url, ObjectVersion version);
// What the latest listing said of `url`, if it was listed.
std::optional<ObjectVersion> ListedVersion(const std::string& url);

// Records that a listing took in every object directly in `folder_url` (a
// URL of a key prefix without its last '/'), or at any depth under it when
// `recursive`: each was remembered, matching the listing's pattern or not.
void RememberListedFolder(const std::string& folder_url, bool recursive, absl::Time now = absl::Now());
// Whether `url` was missing from a listing of a folder holding it made in
// the last kListingTrusted: a companion looked up beside listed objects (a
// TFRecord's index) is known absent without asking the store, once per
// object. An older listing says nothing: objects written since (a later
// pipeline's, a long-lived dispatcher's next job) are asked for.
bool ListedAbsent(const std::string& url, absl::Time now = absl::Now());
inline constexpr absl::Duration kListingTrusted = absl::Seconds(10);

}  // namespace sluice::io

#endif  // SLUICE_IO_OBJECT_LISTING_H_
