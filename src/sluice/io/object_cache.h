// A local copy of the objects a pipeline reads, so that later epochs read
// local disk rather than the store: a folder bounded in bytes (least
// recently used out first), each entry checksummed (CRC32C) and checked
// when first opened, written under a temporary name and renamed, so that
// a partial or corrupt entry is never read: it is removed and fetched
// again. Several processes (a node's ranks) may share the folder.
#ifndef SLUICE_IO_OBJECT_CACHE_H_
#define SLUICE_IO_OBJECT_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sluice/io/object_listing.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {

class ObjectCache {
 public:
  struct Stats {
    // uncacheable: larger than the bound, or not written (a full disk)
    int64_t hits = 0, misses = 0, corrupt = 0, evicted = 0, uncacheable = 0;
    int64_t bytes = 0;  // held in the folder, as this process last counted
  };
  using Fetch = std::function<absl::StatusOr<std::unique_ptr<RandomAccessFile>>()>;

  // Makes the process's cache (sources that name one configure it; one per
  // process): InvalidArgument when another folder or bound is already in
  // use, or max_bytes <= 0; an error naming the folder when it cannot be
  // made. Removes the partial entries of processes that are gone.
  static absl::Status Configure(const std::string& dir, int64_t max_bytes);
  // The process's cache; null when none is configured. Shared: a cache
  // replaced by a later Configure lives on while an open holds it.
  static std::shared_ptr<ObjectCache> Get();

  // `url` at `version`: its copy in the cache when there is a sound one,
  // else `fetch()`'s object, copied into the cache on the way (an object
  // larger than the bound is read from the store as it is). Opens of one
  // entry at once fetch it once.
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> Open(const std::string& url, const ObjectVersion& version,
                                                         const Fetch& fetch);

  Stats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  ObjectCache(std::string dir, int64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

  std::string EntryPath(const std::string& url, const ObjectVersion& version) const;
  // The sound entry at `path` for url and version, or nullptr (none, or it
  // was unsound and is gone).
  std::unique_ptr<RandomAccessFile> Find(const std::string& path, const std::string& url, const ObjectVersion& version);
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> Fill(const std::string& path, const std::string& url,
                                                         const ObjectVersion& version, const RandomAccessFile& object);
  // A miss: fetches the object and copies it in (the object itself when it
  // does not fit or the folder cannot be written).
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> FetchAndFill(const std::string& path, const std::string& url,
                                                                 const ObjectVersion& version, const Fetch& fetch);
  // Removes the least recently used entries until `incoming` more bytes fit.
  // Other processes (a node's ranks) may fill the same folder: this one's
  // own count is trusted for an eighth of the bound filled, then the folder
  // is counted again, with the copies under way at their final length.
  void MakeRoom(int64_t incoming);
  void Count(int64_t Stats::* counter, int64_t n = 1);

  const std::string dir_;
  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  int64_t filled_since_count_ ABSL_GUARDED_BY(mu_) = 0;  // bytes this process added since it counted the folder
  absl::flat_hash_set<std::string> opening_ ABSL_GUARDED_BY(mu_);  // paths an open is looking up or filling
  // Entries checked this process, by path, inode, length and change time:
  // each is read through once, not at every open of one of its splits.
  absl::flat_hash_set<std::string> checked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::io

#endif  // SLUICE_IO_OBJECT_CACHE_H_
