// A file read with pread(2): positional reads, safe to share across threads.
#ifndef SLUICE_IO_RANDOM_ACCESS_FILE_H_
#define SLUICE_IO_RANDOM_ACCESS_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace sluice::io {

// A whole file mapped read-only into memory: its bytes are the page
// cache's, read without a copy. Unmapped when the last reference goes.
class FileMapping {
 public:
  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  friend class RandomAccessFile;
  FileMapping(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  uint64_t size_;
};

// Thread-safe (pread has no shared file position). Closes on destruction.
class RandomAccessFile {
 public:
  // NotFound when the path does not exist; PermissionDenied etc. otherwise.
  static absl::StatusOr<std::unique_ptr<RandomAccessFile>> Open(const std::string& path);
  ~RandomAccessFile();
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  // Reads up to n bytes at `offset` into dst; fewer only at end of file.
  absl::StatusOr<size_t> Read(uint64_t offset, size_t n, void* dst) const;
  // Reads exactly n bytes; DataLoss naming the file and offset if it ends first.
  absl::Status ReadExact(uint64_t offset, size_t n, void* dst) const;

  // The file's size() bytes mapped; an error naming the file where it cannot
  // be mapped (a pipe, a file system without mmap).
  absl::StatusOr<std::shared_ptr<const FileMapping>> Map() const;
  // OK while the file still holds `bytes` bytes; DataLoss naming it once it
  // was cut shorter after opening (reading a mapping past the end of its file
  // would kill the process with SIGBUS, so readers of mappings ask first).
  absl::Status CheckHolds(uint64_t bytes) const;

 private:
  RandomAccessFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_;
  uint64_t size_;
};

// Errno → absl::Status with the operation and path in the message.
absl::Status ErrnoStatus(int err, const std::string& what, const std::string& path);

}  // namespace sluice::io

#endif  // SLUICE_IO_RANDOM_ACCESS_FILE_H_
