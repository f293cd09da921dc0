// What the fuzz targets share: the libFuzzer entry point's signature, the
// fuzzer's bytes as a file for readers that open paths, and a scratch
// directory for targets that need one.
#ifndef SLUICE_BENCH_FUZZ_FUZZ_INPUT_H_
#define SLUICE_BENCH_FUZZ_FUZZ_INPUT_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace sluice::fuzz {

// `bytes` as a file in memory (memfd), at path(): nothing touches the disk,
// so a fuzzer runs at memory speed.
class MemoryFile {
 public:
  MemoryFile(const void* bytes, size_t size) : fd_(::memfd_create("fuzz", 0)) {
    if (fd_ < 0 || ::write(fd_, bytes, size) != static_cast<ssize_t>(size)) std::abort();
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// A directory of this process's own in /dev/shm (memory speed), removed
// when the process exits (libFuzzer's runs and the corpus replays end with
// exit; a crash leaves it, beside the crash's input).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_("/dev/shm/sluice-fuzz-" + name + "-" + std::to_string(::getpid())) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
};

}  // namespace sluice::fuzz

#endif  // SLUICE_BENCH_FUZZ_FUZZ_INPUT_H_
