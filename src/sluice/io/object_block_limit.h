// The bound on objects' blocks fetched ahead (object_read_ahead.h) in this
// process. They are the process's, not one pipeline's, and every
// pipeline's memory budget counts them all, so the smallest bound of the
// pipelines alive holds: each pipeline asks for a quarter of its budget
// while it lives. A reader always fetches the block it reads; only the
// blocks after it wait for room, so the blocks held stay within the bound
// plus one block a reader.
#ifndef SLUICE_IO_OBJECT_BLOCK_LIMIT_H_
#define SLUICE_IO_OBJECT_BLOCK_LIMIT_H_

#include <cstdint>

namespace sluice::io {

class ObjectBlockLimit {
 public:
  // Of a pipeline's memory budget, the share its objects' blocks fetched
  // ahead may take.
  static constexpr int64_t kBudgetShare = 4;  // a quarter

  explicit ObjectBlockLimit(int64_t bytes);
  ~ObjectBlockLimit();
  ObjectBlockLimit(const ObjectBlockLimit&) = delete;
  ObjectBlockLimit& operator=(const ObjectBlockLimit&) = delete;

 private:
  const int64_t bytes_;
};

// The bound now: the smallest of the live ObjectBlockLimits, or no bound
// (INT64_MAX) without one.
int64_t ObjectBlockLimitBytes();

}  // namespace sluice::io

#endif  // SLUICE_IO_OBJECT_BLOCK_LIMIT_H_
