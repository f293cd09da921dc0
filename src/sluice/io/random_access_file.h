// Positional reads of a local file or of an object in a store, safe to
// share across threads.
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
  friend class LocalFile;
  FileMapping(const uint8_t* data, uint64_t size);
  const uint8_t* data_;
  uint64_t size_;
};

// The bytes of the files this process has mapped now. Their pages count in
// RSS once read, though they are the page cache's (the kernel may drop
// them): what the engine holds beside its buffers, outside the budget.
int64_t MappedFileBytes();
// Adds `delta` to MappedFileBytes: for mappings made outside FileMapping
// (Arrow's, for its readers).
void CountMappedFileBytes(int64_t delta);

// A local file (pread) or an object in a store (s3://, gs://; see
// object_store.h). Thread-safe: reads are positional. Closes on destruction.
class RandomAccessFile {
 public:
  // A local path or an object's URL. NotFound when it does not exist;
  // PermissionDenied etc. otherwise, each naming it.
  static absl::StatusOr<std::unique_ptr<RandomAccessFile>> Open(const std::string& path);
  virtual ~RandomAccessFile() = default;
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  // Reads up to n bytes at `offset` into dst; fewer only at end of file.
  virtual absl::StatusOr<size_t> Read(uint64_t offset, size_t n, void* dst) const = 0;
  // Reads exactly n bytes; DataLoss naming the file and offset if it ends first.
  absl::Status ReadExact(uint64_t offset, size_t n, void* dst) const;

  // The file's size() bytes mapped; an error naming the file where it cannot
  // be mapped (a pipe, a file system without mmap, an object in a store).
  virtual absl::StatusOr<std::shared_ptr<const FileMapping>> Map() const;
  // OK while the file still holds `bytes` bytes; DataLoss naming it once it
  // was cut shorter after opening (reading a mapping past the end of its file
  // would kill the process with SIGBUS, so readers of mappings ask first).
  virtual absl::Status CheckHolds(uint64_t bytes) const;

 protected:
  RandomAccessFile(std::string path, uint64_t size) : path_(std::move(path)), size_(size) {}

 private:
  std::string path_;
  uint64_t size_;
};

// Errno → absl::Status with the operation and path in the message.
absl::Status ErrnoStatus(int err, const std::string& what, const std::string& path);
// Creates `dir` and the folders above it that are missing; ErrnoStatus's
// error ("cannot create DIR: ...") when one cannot be.
absl::Status CreateDirectories(const std::string& dir);
// For a path not found: " (a relative path, taken from the current folder
// CWD)" when it is relative (saying that a leading '~' is not expanded),
// else "".
std::string RelativePathHint(const std::string& path);

}  // namespace sluice::io

#endif  // SLUICE_IO_RANDOM_ACCESS_FILE_H_
