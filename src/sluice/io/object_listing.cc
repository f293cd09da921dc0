#include "sluice/io/object_listing.h"

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/synchronization/mutex.h"

namespace sluice::io {
namespace {

// Keyed by the URL's hash, not the URL: millions of objects (an image
// folder) cost 40 MB rather than a copy of every URL.
struct Listings {
  absl::Mutex mu;
  absl::flat_hash_map<size_t, ObjectVersion> versions ABSL_GUARDED_BY(mu);
};

Listings& TheListings() {
  static auto* listings = new Listings();
  return *listings;
}

}  // namespace

void RememberListed(const std::string& url, ObjectVersion version) {
  Listings& l = TheListings();
  absl::MutexLock lock(&l.mu);
  l.versions[absl::HashOf(url)] = version;
}

std::optional<ObjectVersion> ListedVersion(const std::string& url) {
  Listings& l = TheListings();
  absl::MutexLock lock(&l.mu);
  auto it = l.versions.find(absl::HashOf(url));
  if (it == l.versions.end()) return std::nullopt;
  return it->second;
}

}  // namespace sluice::io
