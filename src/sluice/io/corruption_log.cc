#include "sluice/io/corruption_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::io {

void CorruptionLog::Add(int64_t records, std::string message) {
  absl::MutexLock lock(&mu_);
  skipped_ += records;
  if (messages_.size() < kMaxMessages) messages_.push_back(std::move(message));
}

int64_t CorruptionLog::skipped() const {
  absl::MutexLock lock(&mu_);
  return skipped_;
}

std::vector<std::string> CorruptionLog::messages() const {
  absl::MutexLock lock(&mu_);
  return messages_;
}

std::string CorruptionLog::Summary() const {
  absl::MutexLock lock(&mu_);
  if (skipped_ == 0) return "";
  return absl::StrCat("skipped ", skipped_, " corrupt record", skipped_ == 1 ? "" : "s", ": ",
                      absl::StrJoin(messages_, "; "),
                      skipped_ > static_cast<int64_t>(messages_.size()) ? "; ..." : "");
}

}  // namespace sluice::io
