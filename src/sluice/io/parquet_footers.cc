#include "sluice/io/parquet_footers.h"

#include <parquet/metadata.h>

#include <utility>

namespace sluice::io {

std::shared_ptr<parquet::FileMetaData> ParquetFooters::Find(const std::string& path, int64_t size) {
  absl::MutexLock lock(&mu_);
  auto it = by_path_.find(path);
  if (it == by_path_.end() || it->second->size != size) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);
  return entries_.front().footer;
}

void ParquetFooters::Keep(const std::string& path, int64_t size, std::shared_ptr<parquet::FileMetaData> footer) {
  const int64_t bytes = footer->size();
  if (bytes > max_bytes_) return;
  absl::MutexLock lock(&mu_);
  if (auto it = by_path_.find(path); it != by_path_.end()) {
    bytes_ -= it->second->footer->size();
    entries_.erase(it->second);
    by_path_.erase(it);
  }
  entries_.push_front(Entry{path, size, std::move(footer)});
  by_path_[path] = entries_.begin();
  bytes_ += bytes;
  while (bytes_ > max_bytes_) {
    bytes_ -= entries_.back().footer->size();
    by_path_.erase(entries_.back().path);
    entries_.pop_back();
  }
}

}  // namespace sluice::io
