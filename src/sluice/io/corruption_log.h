// Counts and remembers corrupt input skipped under the "skip" policy, so that
// nothing is skipped silently: the run reports the count and the first few
// places at the end.
#ifndef SLUICE_IO_CORRUPTION_LOG_H_
#define SLUICE_IO_CORRUPTION_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sluice::io {

// Thread-safe.
class CorruptionLog {
 public:
  static constexpr size_t kMaxMessages = 10;

  // Records `records` skipped records (a skipped tail of a file counts once)
  // with the message of the error that caused it.
  void Add(int64_t records, std::string message);

  int64_t skipped() const;
  // The first kMaxMessages messages.
  std::vector<std::string> messages() const;
  // "skipped 3 corrupt records: <first message>; ..." or "" when none.
  std::string Summary() const;

 private:
  mutable absl::Mutex mu_;
  int64_t skipped_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::io

#endif  // SLUICE_IO_CORRUPTION_LOG_H_
