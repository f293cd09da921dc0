// A fresh directory under the system temp dir, removed with its contents.
#ifndef SLUICE_TESTS_TESTING_TEMP_DIR_H_
#define SLUICE_TESTS_TESTING_TEMP_DIR_H_

#include <cstdint>
#include <string>

namespace sluice::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Whole-file helpers for tests that corrupt files (leveldb log_test style).
std::string ReadFileBytes(const std::string& path);
void WriteFileBytes(const std::string& path, const std::string& bytes);
// Adds `delta` to the byte at `offset`.
void IncrementByte(const std::string& path, size_t offset, int delta = 1);
// Cuts the file to `size` bytes.
void TruncateFile(const std::string& path, size_t size);
// Bytes this process has read through read(2) and pread(2) so far
// (/proc/self/io's rchar), or -1 where the kernel does not say.
int64_t BytesReadByThisProcess();

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_TEMP_DIR_H_
