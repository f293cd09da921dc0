#include "sluice/io/corruption_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::io {
namespace {

std::string Records(int64_t n) { return absl::StrCat(n, " record", n == 1 ? "" : "s"); }

// ", N bytes"; nothing where the bytes are unknown (0: a sample a map op
// refused, counted without its record's extent).
std::string Bytes(uint64_t bytes) { return bytes == 0 ? "" : absl::StrCat(", ", bytes, " bytes"); }

}  // namespace

void CorruptionLog::Add(const std::string& file, int64_t records, uint64_t bytes, std::string message) {
  absl::MutexLock lock(&mu_);
  FileSkips* entry = nullptr;
  // Newest first: skips of one file come together.
  for (auto it = files_.rbegin(); it != files_.rend() && entry == nullptr; ++it) {
    if (it->file == file) entry = &*it;
  }
  if (entry == nullptr) entry = &files_.emplace_back(FileSkips{file});
  entry->records += records;
  entry->bytes += bytes;
  if (!message.empty() && messages_.size() < kMaxMessages) messages_.push_back(std::move(message));
}

void CorruptionLog::AddMessage(std::string message) {
  absl::MutexLock lock(&mu_);
  if (!message.empty() && messages_.size() < kMaxMessages) messages_.push_back(std::move(message));
}

int64_t CorruptionLog::skipped() const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const FileSkips& f : files_) n += f.records;
  return n;
}

uint64_t CorruptionLog::skipped_bytes() const {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const FileSkips& f : files_) n += f.bytes;
  return n;
}

std::vector<CorruptionLog::FileSkips> CorruptionLog::files() const {
  absl::MutexLock lock(&mu_);
  return files_;
}

std::vector<std::string> CorruptionLog::messages() const {
  absl::MutexLock lock(&mu_);
  return messages_;
}

std::string CorruptionLog::Summary() const {
  const std::vector<FileSkips> files = this->files();
  const std::vector<std::string> messages = this->messages();
  int64_t records = 0;
  uint64_t bytes = 0;
  std::vector<std::string> per_file;
  for (const FileSkips& f : files) {
    records += f.records;
    bytes += f.bytes;
    if (per_file.size() < kMaxMessages) {
      per_file.push_back(absl::StrCat(f.file, ": ", Records(f.records), Bytes(f.bytes)));
    }
  }
  if (records == 0) return "";
  if (files.size() > per_file.size()) per_file.push_back(absl::StrCat("... ", files.size(), " files in all"));
  return absl::StrCat("skipped ", records, " corrupt record", records == 1 ? "" : "s", Bytes(bytes), " (",
                      absl::StrJoin(per_file, "; "), "): ", absl::StrJoin(messages, "; "),
                      records > static_cast<int64_t>(messages.size()) ? "; ..." : "");
}

}  // namespace sluice::io
