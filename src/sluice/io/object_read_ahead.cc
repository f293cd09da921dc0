#include "sluice/io/object_read_ahead.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "sluice/core/byte_gauge.h"
#include "sluice/io/object_block_limit.h"
#include "sluice/io/object_store.h"

namespace sluice::io {
namespace {

int64_t PositiveFromEnvironment(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  int64_t value = 0;
  return text != nullptr && absl::SimpleAtoi(text, &value) && value > 0 ? value : fallback;
}

ByteGauge block_bytes;

}  // namespace

int64_t ObjectBlockBytes() { return block_bytes.now(); }

int64_t ObjectBlockPeakBytes() { return block_bytes.peak(); }

ObjectReadAhead::~ObjectReadAhead() {
  absl::MutexLock lock(&mu_);
  DropAll();
}

void ObjectReadAhead::DropFront() {
  block_bytes.Add(-blocks_.front().bytes);
  blocks_.pop_front();
}

void ObjectReadAhead::DropAll() {
  while (!blocks_.empty()) DropFront();
}

ObjectReadAhead::Options ObjectReadAhead::FromEnvironment() {
  Options options;
  options.block_bytes = PositiveFromEnvironment("SLUICE_OBJECT_BLOCK_BYTES", options.block_bytes);
  options.depth =
      static_cast<int>(std::min<int64_t>(PositiveFromEnvironment("SLUICE_OBJECT_READ_AHEAD", options.depth), 64));
  return options;
}

void ObjectReadAhead::FetchFrom(uint64_t first) {
  while (!blocks_.empty() && blocks_.front().index < first) DropFront();
  if (!blocks_.empty() && blocks_.front().index != first) DropAll();
  const uint64_t block = static_cast<uint64_t>(options_.block_bytes);
  const uint64_t blocks_in_object = (size_ + block - 1) / block;
  uint64_t next = blocks_.empty() ? first : blocks_.back().index + 1;
  while (blocks_.size() < static_cast<size_t>(options_.depth) && next < blocks_in_object) {
    const uint64_t begin = next * block;
    const int64_t bytes = static_cast<int64_t>(std::min(block, size_ - begin));
    // The block read now always comes; those after it only within the bound.
    if (blocks_.empty()) {
      block_bytes.Add(bytes);
    } else if (!block_bytes.AddWithin(bytes, ObjectBlockLimitBytes())) {
      break;
    }
    blocks_.push_back(Block{next, bytes, in_->ReadAsync(static_cast<int64_t>(begin), bytes)});
    ++next;
  }
}

arrow::Result<size_t> ObjectReadAhead::Read(uint64_t offset, size_t n, uint8_t* dst) {
  const uint64_t block = static_cast<uint64_t>(options_.block_bytes);
  absl::MutexLock lock(&mu_);
  FetchFrom(offset / block);
  // Waited for under the lock: one reader reads one object.
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> data, blocks_.front().data.result());
  const uint64_t in_block = offset - blocks_.front().index * block;
  if (in_block >= static_cast<uint64_t>(data->size())) return 0;  // the object shrank
  const size_t copied = static_cast<size_t>(std::min<uint64_t>(n, static_cast<uint64_t>(data->size()) - in_block));
  std::memcpy(dst, data->data() + in_block, copied);
  return copied;
}

void ObjectReadAhead::FetchFirst() {
  absl::MutexLock lock(&mu_);
  const int64_t bytes = static_cast<int64_t>(std::min<uint64_t>(options_.block_bytes, size_));
  if (!blocks_.empty() || bytes == 0 || !block_bytes.AddWithin(bytes, ObjectBlockLimitBytes())) return;
  blocks_.push_back(Block{0, bytes, in_->ReadAsync(0, bytes)});
}

void ObjectReadAhead::Forget() {
  absl::MutexLock lock(&mu_);
  DropAll();
}

}  // namespace sluice::io
