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
  struct Folder {
    bool recursive = false;
    absl::Time listed = absl::InfinitePast();
  };
  absl::flat_hash_map<std::string, Folder> folders ABSL_GUARDED_BY(mu);
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

void RememberListedFolder(const std::string& folder_url, bool recursive, absl::Time now) {
  Listings& l = TheListings();
  absl::MutexLock lock(&l.mu);
  Listings::Folder& f = l.folders[folder_url];
  f.recursive = recursive || (f.recursive && now - f.listed <= kListingTrusted);
  f.listed = now;
}

bool ListedAbsent(const std::string& url, absl::Time now) {
  const size_t q = url.find('?');
  const std::string query = q == std::string::npos ? "" : url.substr(q);
  std::string folder = url.substr(0, q);
  const size_t bucket_end = folder.find('/', folder.find("://") + 3);
  Listings& l = TheListings();
  absl::MutexLock lock(&l.mu);
  if (l.versions.contains(absl::HashOf(url))) return false;
  for (bool parent = true; folder.size() > bucket_end && bucket_end != std::string::npos; parent = false) {
    folder.resize(folder.rfind('/'));
    auto it = l.folders.find(folder + query);
    if (it != l.folders.end() && (parent || it->second.recursive) && now - it->second.listed <= kListingTrusted) {
      return true;
    }
  }
  return false;
}

}  // namespace sluice::io
