// Counts and remembers corrupt input skipped under the "skip" policy, so that
// nothing is skipped silently: the run reports the records and bytes skipped
// in each file and the first few errors at the end.
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

  struct FileSkips {
    std::string file;
    int64_t records = 0;
    uint64_t bytes = 0;
  };

  // Records that `records` records, `bytes` bytes in all, of `file` were
  // skipped because of the error `message`.
  void Add(const std::string& file, int64_t records, uint64_t bytes, std::string message);
  // Keeps `message` among the first few (an empty one is not kept).
  void AddMessage(std::string message);

  int64_t skipped() const;
  uint64_t skipped_bytes() const;
  // Per file, in the order they were first added.
  std::vector<FileSkips> files() const;
  // The first kMaxMessages messages.
  std::vector<std::string> messages() const;
  // "skipped 3 corrupt records, 120 bytes (a.tfrecord: 2 records, 80 bytes;
  // ...): <first message>; ..." or "" when none.
  std::string Summary() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<FileSkips> files_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::io

#endif  // SLUICE_IO_CORRUPTION_LOG_H_
