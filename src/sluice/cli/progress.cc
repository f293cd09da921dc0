#include "sluice/cli/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice::cli {

ProgressLine::ProgressLine(bool enabled)
    : enabled_(enabled), tty_(::isatty(2) != 0), last_(std::chrono::steady_clock::now()) {}

bool ProgressLine::Due() {
  if (!enabled_) return false;
  const auto now = std::chrono::steady_clock::now();
  const auto interval = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000);
  if (now - last_ < interval) return false;
  last_ = now;
  return true;
}

void ProgressLine::Show(const std::string& text) {
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  shown_ = true;
  std::fflush(stderr);
}

void ProgressLine::Finish() {
  if (enabled_ && tty_ && shown_) std::fprintf(stderr, "\n");
  shown_ = false;
}

MemoryUsage CurrentMemoryUsage() {
  MemoryUsage usage;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream in(line);
    std::string key;
    int64_t kb = 0;
    in >> key >> kb;
    if (key == "VmRSS:") usage.rss = kb * 1024;
    if (key == "VmHWM:") usage.peak_rss = kb * 1024;
  }
  return usage;
}

std::string WithCommas(double value) {
  std::string digits = std::to_string(static_cast<long long>(std::llround(value)));
  std::string out;
  const int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    out.push_back(digits[i]);
    const int left = n - 1 - i;
    if (left > 0 && left % 3 == 0 && digits[i] != '-') out.push_back(',');
  }
  return out;
}

std::string InBinaryUnits(int64_t bytes) {
  constexpr int64_t kKiB = 1024, kMiB = kKiB * kKiB;
  if (bytes % kMiB == 0 && bytes != 0) return absl::StrCat(bytes / kMiB, " MiB");
  if (bytes >= kMiB) return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / kMiB);
  if (bytes >= kKiB) return absl::StrFormat("%.1f KiB", static_cast<double>(bytes) / kKiB);
  return absl::StrCat(bytes, " bytes");
}

}  // namespace sluice::cli
