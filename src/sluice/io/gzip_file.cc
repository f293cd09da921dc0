#include "sluice/io/gzip_file.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "sluice/core/status_macros.h"

namespace sluice::io {
namespace {

constexpr size_t kPiece = size_t{1} << 20;

constexpr absl::string_view kDamage = "sluice.io.gzip_damage";

absl::Status Named(const absl::Status& status, const RandomAccessFile& file) {
  return absl::Status(status.code(), absl::StrCat(file.path(), ": ", status.message()));
}

// Decompressed sizes of the files opened, by path, compressed size and
// last 8 bytes: later epochs decompress a file once, not twice.
class InflatedSizes {
 public:
  static InflatedSizes& Get() {
    static InflatedSizes* sizes = new InflatedSizes();
    return *sizes;
  }
  std::optional<uint64_t> Find(const std::string& key) {
    absl::MutexLock lock(&mu_);
    auto it = sizes_.find(key);
    return it == sizes_.end() ? std::nullopt : std::optional<uint64_t>(it->second);
  }
  void Keep(const std::string& key, uint64_t size) {
    absl::MutexLock lock(&mu_);
    sizes_[key] = size;
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, uint64_t> sizes_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::string> SizeKey(const RandomAccessFile& file) {
  char tail[8] = {};
  const uint64_t at = file.size() - std::min<uint64_t>(file.size(), sizeof(tail));
  SLUICE_ASSIGN_OR_RETURN(const size_t got, file.Read(at, sizeof(tail), tail));
  return absl::StrCat(file.path(), "\n", file.size(), "\n", absl::string_view(tail, got));
}

absl::StatusOr<uint64_t> InflatedSize(const RandomAccessFile& file) {
  GzipInflater counter(&file);
  std::vector<char> sink(kPiece);
  uint64_t size = 0;
  while (true) {
    absl::StatusOr<size_t> got = counter.Read(sink.data(), sink.size());
    if (!got.ok() && !counter.damaged()) return got.status();
    if (!got.ok()) {
      absl::Status damage = Named(got.status(), file);
      damage.SetPayload(kDamage, absl::Cord("1"));
      return damage;
    }
    if (*got == 0) return size;
    size += *got;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<RandomAccessFile>> GzipFile::Open(std::unique_ptr<RandomAccessFile> compressed) {
  SLUICE_ASSIGN_OR_RETURN(const std::string key, SizeKey(*compressed));
  std::optional<uint64_t> size = InflatedSizes::Get().Find(key);
  if (!size) {
    SLUICE_ASSIGN_OR_RETURN(size, InflatedSize(*compressed));
    InflatedSizes::Get().Keep(key, *size);
  }
  return std::unique_ptr<RandomAccessFile>(new GzipFile(std::move(compressed), *size));
}

GzipFile::GzipFile(std::unique_ptr<RandomAccessFile> compressed, uint64_t size)
    : RandomAccessFile(compressed->path(), size), compressed_(std::move(compressed)) {}

bool GzipFile::IsDamage(const absl::Status& status) { return status.GetPayload(kDamage).has_value(); }

absl::StatusOr<size_t> GzipFile::Read(uint64_t offset, size_t n, void* dst) const {
  if (offset >= size()) return 0;
  absl::MutexLock lock(&mu_);
  if (inflater_ == nullptr || offset < position_) {
    inflater_ = std::make_unique<GzipInflater>(compressed_.get());
    position_ = 0;
  }
  while (position_ < offset) {
    SLUICE_ASSIGN_OR_RETURN(const size_t passed, Inflate(std::min<uint64_t>(offset - position_, kPiece), nullptr));
    if (passed == 0) return 0;  // past the end
  }
  const uint64_t end = size();
  SLUICE_ASSIGN_OR_RETURN(
      const size_t got,
      Inflate(static_cast<size_t>(std::min<uint64_t>(n, end - std::min(end, offset))), static_cast<char*>(dst)));
  if (position_ == end) SLUICE_RETURN_IF_ERROR(CheckEnd());
  return got;
}

absl::Status GzipFile::CheckEnd() const {
  char past;
  SLUICE_ASSIGN_OR_RETURN(const size_t more, Inflate(1, &past));
  if (more == 0) return absl::OkStatus();
  inflater_.reset();
  return absl::DataLossError(
      absl::StrCat(path(), " holds more than the ", size(), " bytes it held when first read: it changed since"));
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
