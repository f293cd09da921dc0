#include "sluice/io/object_read_ahead.h"

#include <algorithm>
#include <cstring>

#include "sluice/core/byte_gauge.h"
#include "sluice/core/environment_number.h"
#include "sluice/io/object_block_limit.h"
#include "sluice/io/object_store.h"

namespace sluice::io {
namespace {

ByteGauge block_bytes;

}  // namespace

int64_t ObjectBlockBytes() { return block_bytes.now(); }

int64_t ObjectBlockPeakBytes() { return block_bytes.peak(); }

ObjectReadAhead::ObjectReadAhead(std::shared_ptr<arrow::io::RandomAccessFile> in, uint64_t size, Options options,
                                 Fetched fetched)
    : in_(std::move(in)),
      size_(size),
      options_(options),
      first_bytes_(static_cast<uint64_t>(std::min(options.first_block_bytes, options.block_bytes))),
      fetched_(std::move(fetched)) {}

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
  options.block_bytes = IntFromEnvironment("SLUICE_OBJECT_BLOCK_BYTES", options.block_bytes, 1);
  options.first_block_bytes = IntFromEnvironment("SLUICE_OBJECT_FIRST_BLOCK_BYTES", options.first_block_bytes, 1);
  options.depth =
      static_cast<int>(std::min<int64_t>(IntFromEnvironment("SLUICE_OBJECT_READ_AHEAD", options.depth, 1), 64));
  return options;
}

uint64_t ObjectReadAhead::BlockBegin(uint64_t index) const {
  return index == 0 ? 0 : first_bytes_ + (index - 1) * static_cast<uint64_t>(options_.block_bytes);
}

uint64_t ObjectReadAhead::BlockOf(uint64_t offset) const {
  return offset < first_bytes_ ? 0 : 1 + (offset - first_bytes_) / static_cast<uint64_t>(options_.block_bytes);
}

uint64_t ObjectReadAhead::BlockCount() const { return size_ == 0 ? 0 : BlockOf(size_ - 1) + 1; }

int64_t ObjectReadAhead::BlockBytes(uint64_t index) const {
  return static_cast<int64_t>(std::min(BlockBegin(index + 1), size_) - BlockBegin(index));
}

ObjectReadAhead::Block ObjectReadAhead::Fetch(uint64_t index) {
  const int64_t bytes = BlockBytes(index);
  Block block{index, bytes, ++fetches_, in_->ReadAsync(static_cast<int64_t>(BlockBegin(index)), bytes)};
  if (fetched_) {
    block.data.AddCallback(
        [fetched = fetched_, fetch = block.fetch](const arrow::Result<std::shared_ptr<arrow::Buffer>>& got) {
          if (got.ok()) fetched(fetch);
        });
  }
  return block;
}

void ObjectReadAhead::FetchFrom(uint64_t first) {
  while (!blocks_.empty() && blocks_.front().index < first) DropFront();
  if (!blocks_.empty() && blocks_.front().index != first) DropAll();
  const uint64_t count = BlockCount();
  uint64_t next = blocks_.empty() ? first : blocks_.back().index + 1;
  while (blocks_.size() < static_cast<size_t>(options_.depth) && next < count) {
    const int64_t bytes = BlockBytes(next);
    // The block read now always comes; those after it only within the bound.
    if (blocks_.empty()) {
      block_bytes.Add(bytes);
    } else if (!block_bytes.AddWithin(bytes, ObjectBlockLimitBytes())) {
      break;
    }
    blocks_.push_back(Fetch(next));
    ++next;
  }
}

arrow::Result<size_t> ObjectReadAhead::Read(uint64_t offset, size_t n, uint8_t* dst, uint64_t* fetch) {
  absl::MutexLock lock(&mu_);
  FetchFrom(BlockOf(offset));
  // Waited for under the lock: one reader reads one object.
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> data, blocks_.front().data.result());
  if (fetch != nullptr) *fetch = blocks_.front().fetch;
  const uint64_t in_block = offset - BlockBegin(blocks_.front().index);
  if (in_block >= static_cast<uint64_t>(data->size())) return 0;  // the object shrank
  const size_t copied = static_cast<size_t>(std::min<uint64_t>(n, static_cast<uint64_t>(data->size()) - in_block));
  std::memcpy(dst, data->data() + in_block, copied);
  return copied;
}

void ObjectReadAhead::FetchFirst() {
  absl::MutexLock lock(&mu_);
  if (!blocks_.empty()) return;
  // As many as a reader keeps in flight, all within the bound: the first is
  // short, and a reader that found only it would wait for the next at once.
  for (uint64_t index = 0; index < std::min<uint64_t>(options_.depth, BlockCount()); ++index) {
    if (!block_bytes.AddWithin(BlockBytes(index), ObjectBlockLimitBytes())) return;
    blocks_.push_back(Fetch(index));
  }
}

void ObjectReadAhead::Forget() {
  absl::MutexLock lock(&mu_);
  DropAll();
}

}  // namespace sluice::io
