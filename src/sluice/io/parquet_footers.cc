#include "sluice/io/parquet_footers.h"

#include <parquet/metadata.h>

#include <utility>

namespace sluice::io {

std::shared_ptr<parquet::FileMetaData> ParquetFooters::Find(const std::string& path, const std::string& version) {
  absl::MutexLock lock(&mu_);
  auto it = by_path_.find(path);
  if (it == by_path_.end() || it->second->version != version) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);
  return entries_.front().footer;
}

void ParquetFooters::Keep(const std::string& path, const std::string& version,
                          std::shared_ptr<parquet::FileMetaData> footer) {
  const int64_t bytes = footer->size();
  absl::MutexLock lock(&mu_);
  if (auto it = by_path_.find(path); it != by_path_.end()) Drop(it);
  if (bytes > max_bytes_) return;
  entries_.push_front(Entry{path, version, std::move(footer)});
  by_path_[path] = entries_.begin();
  bytes_ += bytes;
  while (bytes_ > max_bytes_) Drop(by_path_.find(entries_.back().path));
}

void ParquetFooters::Drop(std::map<std::string, std::list<Entry>::iterator>::iterator it) {
  bytes_ -= it->second->footer->size();
  entries_.erase(it->second);
  by_path_.erase(it);
}

}  // namespace sluice::io
