// A live progress line on stderr: redrawn in place on a terminal, a line
// every few seconds otherwise (CI logs).
#ifndef SLUICE_CLI_PROGRESS_H_
#define SLUICE_CLI_PROGRESS_H_

#include <chrono>
#include <string>

namespace sluice::cli {

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  // Shows make_text() if enough time passed since the last update; the text
  // is only built then, so per-batch calls stay cheap.
  template <typename MakeText>
  void Update(MakeText&& make_text) {
    if (Due()) Show(make_text());
  }
  // Ends the line (keeps the last text on a terminal).
  void Finish();

 private:
  bool Due();
  void Show(const std::string& text);

  bool enabled_;
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_;
};

// Resident set size and its high-water mark of this process, in bytes
// (from /proc/self/status).
struct MemoryUsage {
  int64_t rss = 0;
  int64_t peak_rss = 0;
};
MemoryUsage CurrentMemoryUsage();

// "1,234,567".
std::string WithCommas(double value);
// A size in binary units: "256 MiB", "2.9 MiB", "195.3 KiB", "100 bytes".
std::string InBinaryUnits(int64_t bytes);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_PROGRESS_H_
