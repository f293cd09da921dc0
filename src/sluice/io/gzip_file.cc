#include "sluice/io/gzip_file.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"

namespace sluice::io {
namespace {

constexpr size_t kPiece = size_t{1} << 20;

absl::Status Named(const absl::Status& status, const RandomAccessFile& file) {
  return absl::Status(status.code(), absl::StrCat(file.path(), ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RandomAccessFile>> GzipFile::Open(std::unique_ptr<RandomAccessFile> compressed) {
  GzipInflater counter(compressed.get());
  std::vector<char> sink(kPiece);
  uint64_t size = 0;
  while (true) {
    absl::StatusOr<size_t> got = counter.Read(sink.data(), sink.size());
    if (!got.ok()) return counter.damaged() ? Named(got.status(), *compressed) : got.status();
    if (*got == 0) break;
    size += *got;
  }
  return std::unique_ptr<RandomAccessFile>(new GzipFile(std::move(compressed), size));
}

GzipFile::GzipFile(std::unique_ptr<RandomAccessFile> compressed, uint64_t size)
    : RandomAccessFile(compressed->path(), size), compressed_(std::move(compressed)) {}

absl::StatusOr<size_t> GzipFile::Read(uint64_t offset, size_t n, void* dst) const {
  absl::MutexLock lock(&mu_);
  if (inflater_ == nullptr || offset < position_) {
    inflater_ = std::make_unique<GzipInflater>(compressed_.get());
    position_ = 0;
  }
  while (position_ < offset) {
    SLUICE_ASSIGN_OR_RETURN(const size_t passed, Inflate(std::min<uint64_t>(offset - position_, kPiece), nullptr));
    if (passed == 0) return 0;  // past the end
  }
  return Inflate(n, static_cast<char*>(dst));
}

absl::StatusOr<size_t> GzipFile::Inflate(size_t n, char* dst) const {
  if (dst == nullptr) sink_.resize(std::min(n, kPiece));
  size_t done = 0;
  while (done < n) {
    char* into = dst != nullptr ? dst + done : sink_.data();
    const size_t want = dst != nullptr ? n - done : std::min(n - done, sink_.size());
    absl::StatusOr<size_t> got = inflater_->Read(into, want);
    if (!got.ok()) {
      const bool damaged = inflater_->damaged();
      inflater_.reset();  // the next read starts again
      return damaged ? Named(got.status(), *this) : got.status();
    }
    if (*got == 0) break;
    done += *got;
  }
  position_ += done;
  return done;
}

}  // namespace sluice::io
