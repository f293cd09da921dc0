// Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
#include "sluice/io/arrow_counted_files.h"

#include <arrow/buffer.h>
#include <arrow/io/file.h>
#include <arrow/util/future.h>

#include <atomic>
#include <vector>

#include "sluice/io/random_access_file.h"

namespace sluice::io {
namespace {

// Forwards every call to `file_`; the subclasses change the reads that
// return buffers.
class ForwardingFile : public arrow::io::RandomAccessFile {
 public:
  // `file` as its base class: that names every ReadAt (a subclass such as
  // MemoryMappedFile hides some).
  explicit ForwardingFile(std::shared_ptr<arrow::io::RandomAccessFile> file) : file_(std::move(file)) {}

  arrow::Status Close() override { return file_->Close(); }
  bool closed() const override { return file_->closed(); }
  arrow::Result<int64_t> Tell() const override { return file_->Tell(); }
  arrow::Status Seek(int64_t position) override { return file_->Seek(position); }
  arrow::Result<int64_t> GetSize() override { return file_->GetSize(); }
  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override { return file_->Read(nbytes, out); }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, bool allow_short_read, void* out) override {
    return file_->ReadAt(position, nbytes, allow_short_read, out);
  }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    return file_->ReadAt(position, nbytes, out);
  }
  arrow::Status WillNeed(const std::vector<arrow::io::ReadRange>& ranges) override { return file_->WillNeed(ranges); }
  const arrow::io::IOContext& io_context() const override { return file_->io_context(); }

 protected:
  const std::shared_ptr<arrow::io::RandomAccessFile> file_;
};

std::atomic<int64_t> held_object_read_bytes{0};

void CountObjectReadBytes(int64_t delta) { held_object_read_bytes.fetch_add(delta, std::memory_order_relaxed); }

using Count = void (*)(int64_t delta);

// A buffer read, counted by `count` while it (or a slice of it) lives.
class CountedBuffer : public arrow::Buffer {
 public:
  CountedBuffer(std::shared_ptr<arrow::Buffer> read, Count count)
      : arrow::Buffer(read->data(), read->size()), count_(count) {
    parent_ = std::move(read);
    count_(size_);
  }
  ~CountedBuffer() override { count_(-size_); }

 private:
  const Count count_;
};

// A file whose reads that return buffers are counted by `Counter`.
template <Count Counter>
class CountedReadsFile : public ForwardingFile {
 public:
  using ForwardingFile::ForwardingFile;
  using ForwardingFile::Read;
  using ForwardingFile::ReadAt;

  bool supports_zero_copy() const override { return file_->supports_zero_copy(); }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override { return Counted(file_->Read(nbytes)); }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes,
                                                       bool allow_short_read) override {
    return Counted(file_->ReadAt(position, nbytes, allow_short_read));
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override {
    return Counted(file_->ReadAt(position, nbytes));
  }
  arrow::Future<std::shared_ptr<arrow::Buffer>> ReadAsync(const arrow::io::IOContext& context, int64_t position,
                                                          int64_t nbytes, bool allow_short_read) override {
    return file_->ReadAsync(context, position, nbytes, allow_short_read).Then(Wrap);
  }
  arrow::Future<std::shared_ptr<arrow::Buffer>> ReadAsync(const arrow::io::IOContext& context, int64_t position,
                                                          int64_t nbytes) override {
    return file_->ReadAsync(context, position, nbytes).Then(Wrap);
  }

 private:
  static std::shared_ptr<arrow::Buffer> Wrap(const std::shared_ptr<arrow::Buffer>& read) {
    return std::make_shared<CountedBuffer>(read, Counter);
  }
  static arrow::Result<std::shared_ptr<arrow::Buffer>> Counted(arrow::Result<std::shared_ptr<arrow::Buffer>> read) {
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> buffer, std::move(read));
    return Wrap(buffer);
  }
};

}  // namespace

arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenCountedMapping(const std::string& path) {
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::io::MemoryMappedFile> file,
                        arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ));
  return std::make_shared<CountedReadsFile<&CountMappedFileBytes>>(std::move(file));
}

std::shared_ptr<arrow::io::RandomAccessFile> CountingReads(std::shared_ptr<arrow::io::RandomAccessFile> file) {
  return std::make_shared<CountedReadsFile<&CountObjectReadBytes>>(std::move(file));
}

int64_t HeldObjectReadBytes() { return held_object_read_bytes.load(std::memory_order_relaxed); }

}  // namespace sluice::io
