#include "sluice/io/tfrecord_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/io/crc32c.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {

absl::StatusOr<std::unique_ptr<TfRecordWriter>> OpenWriter(const std::string& path,
                                                           const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (f == nullptr) return ErrnoStatus(errno, "cannot open for writing", path);
  return std::unique_ptr<TfRecordWriter>(new TfRecordWriter(path, f));
}

absl::StatusOr<std::unique_ptr<TfRecordWriter>> TfRecordWriter::Create(const std::string& path) {
  return OpenWriter(path, "wb");
}

absl::StatusOr<std::unique_ptr<TfRecordWriter>> TfRecordWriter::Append(const std::string& path) {
  return OpenWriter(path, "ab");
}

absl::Status TfRecordWriter::Sync() {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat("sync of closed file ", path_));
  if (std::fflush(file_) != 0 || ::fdatasync(::fileno(file_)) != 0) {
    return ErrnoStatus(errno, "cannot sync", path_);
  }
  return absl::OkStatus();
}

TfRecordWriter::~TfRecordWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status TfRecordWriter::Write(absl::string_view record) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("write to closed file ", path_));
  }
  uint8_t header[12];
  const uint64_t length = record.size();
  std::memcpy(header, &length, 8);
  const uint32_t length_crc = MaskCrc(Crc32c(header, 8));
  std::memcpy(header + 8, &length_crc, 4);
  const uint32_t data_crc = MaskCrc(Crc32c(record.data(), record.size()));
  if (std::fwrite(header, 1, 12, file_) != 12 ||
      std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fwrite(&data_crc, 1, 4, file_) != 4) {
    return ErrnoStatus(errno, "cannot write", path_);
  }
  return absl::OkStatus();
}

absl::Status TfRecordWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) return ErrnoStatus(errno, "cannot close", path_);
  return absl::OkStatus();
}

}  // namespace sluice::io
