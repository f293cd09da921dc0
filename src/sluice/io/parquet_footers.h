// Parsed Parquet footers of the files a source reads, kept so that reading
// a row group does not parse its file's footer again. The footer lists
// every row group: parsed for each one, a file's read was quadratic in its
// groups (8,000 groups of one row: 48 s, against 0.9 s as Arrow IPC).
// Bounded by the footers' bytes, the least recently used let go first.
// Thread-safe.
#ifndef SLUICE_IO_PARQUET_FOOTERS_H_
#define SLUICE_IO_PARQUET_FOOTERS_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"

namespace parquet {
class FileMetaData;
}  // namespace parquet

namespace sluice::io {

class ParquetFooters {
 public:
  explicit ParquetFooters(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // The footer kept for `path` when the file is still at `version` (its
  // size and modification time: one rewritten since is parsed afresh);
  // null otherwise.
  std::shared_ptr<parquet::FileMetaData> Find(const std::string& path, const std::string& version);
  void Keep(const std::string& path, const std::string& version, std::shared_ptr<parquet::FileMetaData> footer);

 private:
  struct Entry {
    std::string path;
    std::string version;
    std::shared_ptr<parquet::FileMetaData> footer;
  };

  const int64_t max_bytes_;
  absl::Mutex mu_;
  std::list<Entry> entries_ ABSL_GUARDED_BY(mu_);  // the most recently used first
  std::map<std::string, std::list<Entry>::iterator> by_path_ ABSL_GUARDED_BY(mu_);
  void Drop(std::map<std::string, std::list<Entry>::iterator>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::io

#endif  // SLUICE_IO_PARQUET_FOOTERS_H_
