#include "sluice/io/random_access_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "sluice/core/descriptor_limit.h"
#include "sluice/io/object_store.h"

namespace sluice::io {

std::string RelativePathHint(const std::string& path) {
  if (path.empty() || path[0] == '/') return "";
  std::error_code error;
  const std::filesystem::path here = std::filesystem::current_path(error);
  if (error) return "";
  // Shells expand '~'; a path handed over from Python or JSON keeps it.
  const bool tilde = path[0] == '~' && (path.size() == 1 || path[1] == '/');
  return absl::StrCat(" (a relative path, taken from the current folder ", here.string(),
                      tilde ? "; '~' is not expanded: expand it first, as Python's os.path.expanduser does)" : ")");
}

absl::Status CreateDirectories(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  return error ? ErrnoStatus(error.value(), "cannot create", dir) : absl::OkStatus();
}

absl::Status ErrnoStatus(int err, const std::string& what, const std::string& path) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err),
                                       err == ENOENT ? RelativePathHint(path) : "", DescriptorLimitHint(err));
  switch (err) {
    case EMFILE:
    case ENFILE:
      return absl::ResourceExhaustedError(msg);
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EISDIR:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::UnknownError(msg);
  }
}

// A local file read with pread(2).
class LocalFile : public RandomAccessFile {
 public:
  LocalFile(std::string path, int fd, uint64_t size) : RandomAccessFile(std::move(path), size), fd_(fd) {}
  ~LocalFile() override { ::close(fd_); }

  absl::StatusOr<size_t> Read(uint64_t offset, size_t n, void* dst) const override;
  absl::StatusOr<std::shared_ptr<const FileMapping>> Map() const override;
  absl::Status CheckHolds(uint64_t bytes) const override;

 private:
  int fd_;
};

absl::StatusOr<std::unique_ptr<RandomAccessFile>> RandomAccessFile::Open(const std::string& path) {
  if (IsObjectUrl(path)) return OpenObject(path);
  // Non-blocking: a FIFO with no writer would hold the open for good (on a
  // file, the flag changes nothing).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "cannot stat", path);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is a directory, not a file"));
  }
  if (!S_ISREG(st.st_mode)) {  // its size says nothing (0), and a stream cannot be read at offsets
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     " is a pipe, socket or device, not a file: sluice reads files at offsets, so a stream (a FIFO, a "
                     "shell's <(...)) must be written to a file first"));
  }
  return std::make_unique<LocalFile>(path, fd, static_cast<uint64_t>(st.st_size));
}

absl::StatusOr<std::shared_ptr<const FileMapping>> RandomAccessFile::Map() const {
  return absl::UnimplementedError(absl::StrCat("cannot map ", path_, ": only local files can be mapped"));
}

absl::Status RandomAccessFile::CheckHolds(uint64_t bytes) const {
  if (size_ >= bytes) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(path_, " holds ", size_, " bytes, and ", bytes, " are needed"));
}

absl::StatusOr<size_t> LocalFile::Read(uint64_t offset, size_t n, void* dst) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, static_cast<char*>(dst) + done, n - done, offset + done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("cannot read at offset ", offset + done, " of"), path());
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

absl::Status RandomAccessFile::ReadExact(uint64_t offset, size_t n, void* dst) const {
  absl::StatusOr<size_t> got = Read(offset, n, dst);
  if (!got.ok()) return got.status();
  if (*got != n) {
    return absl::DataLossError(absl::StrCat("truncated file ", path_, ": wanted ", n, " bytes at offset ", offset,
                                            ", file ends after ", *got));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const FileMapping>> LocalFile::Map() const {
  if (size() == 0) return absl::InvalidArgumentError(absl::StrCat("cannot map ", path(), ": it is empty"));
  void* p = ::mmap(nullptr, size(), PROT_READ, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) return ErrnoStatus(errno, "cannot map", path());
  ::madvise(p, size(), MADV_WILLNEED);  // read ahead now: the first epoch faults in fewer pages
  return std::shared_ptr<const FileMapping>(new FileMapping(static_cast<const uint8_t*>(p), size()));
}

absl::Status LocalFile::CheckHolds(uint64_t bytes) const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus(errno, "cannot stat", path());
  if (static_cast<uint64_t>(st.st_size) < bytes) {
    return absl::DataLossError(absl::StrCat("truncated file ", path(), ": it was cut to ", st.st_size,
                                            " bytes while being read, and ", bytes, " are needed"));
  }
  return absl::OkStatus();
}

namespace {
std::atomic<int64_t> mapped_bytes{0};
}  // namespace

int64_t MappedFileBytes() { return mapped_bytes.load(std::memory_order_relaxed); }

void CountMappedFileBytes(int64_t delta) { mapped_bytes.fetch_add(delta, std::memory_order_relaxed); }

FileMapping::FileMapping(const uint8_t* data, uint64_t size) : data_(data), size_(size) {
  CountMappedFileBytes(static_cast<int64_t>(size));
}

FileMapping::~FileMapping() {
  ::munmap(const_cast<uint8_t*>(data_), size());
  CountMappedFileBytes(-static_cast<int64_t>(size_));
}

}  // namespace sluice::io
