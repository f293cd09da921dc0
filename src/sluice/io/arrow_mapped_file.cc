// Built only with Arrow (SLUICE_WITH_ARROW), as C++20.
#include "sluice/io/arrow_mapped_file.h"

#include <arrow/buffer.h>
#include <arrow/io/file.h>

#include "sluice/io/random_access_file.h"

namespace sluice::io {
namespace {

// A slice of the mapping, counted while it (or a slice of it) lives.
class CountedBuffer : public arrow::Buffer {
 public:
  explicit CountedBuffer(std::shared_ptr<arrow::Buffer> mapped) : arrow::Buffer(mapped->data(), mapped->size()) {
    parent_ = std::move(mapped);
    CountMappedFileBytes(size_);
  }
  ~CountedBuffer() override { CountMappedFileBytes(-size_); }
};

arrow::Result<std::shared_ptr<arrow::Buffer>> Counted(arrow::Result<std::shared_ptr<arrow::Buffer>> read) {
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> mapped, std::move(read));
  return std::make_shared<CountedBuffer>(std::move(mapped));
}

// Arrow's mapped file, the buffers it returns counted.
class CountedMappedFile : public arrow::io::RandomAccessFile {
 public:
  explicit CountedMappedFile(std::shared_ptr<arrow::io::RandomAccessFile> mapped) : file_(std::move(mapped)) {}

  arrow::Status Close() override { return file_->Close(); }
  bool closed() const override { return file_->closed(); }
  arrow::Result<int64_t> Tell() const override { return file_->Tell(); }
  arrow::Status Seek(int64_t position) override { return file_->Seek(position); }
  arrow::Result<int64_t> GetSize() override { return file_->GetSize(); }
  bool supports_zero_copy() const override { return true; }

  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override { return file_->Read(nbytes, out); }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override { return Counted(file_->Read(nbytes)); }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, bool allow_short_read, void* out) override {
    return file_->ReadAt(position, nbytes, allow_short_read, out);
  }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    return file_->ReadAt(position, nbytes, out);
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes,
                                                       bool allow_short_read) override {
    return Counted(file_->ReadAt(position, nbytes, allow_short_read));
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override {
    return Counted(file_->ReadAt(position, nbytes));
  }

 private:
  // Arrow's MemoryMappedFile, as its base: that names every ReadAt.
  const std::shared_ptr<arrow::io::RandomAccessFile> file_;
};

}  // namespace

arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenCountedMapping(const std::string& path) {
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::io::MemoryMappedFile> file,
                        arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ));
  return std::make_shared<CountedMappedFile>(std::move(file));
}

}  // namespace sluice::io
