#include "sluice/io/tfrecord_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/io/crc32c.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {

absl::StatusOr<std::unique_ptr<TfRecordWriter>> TfRecordWriter::Create(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return ErrnoStatus(errno, "cannot open for writing", path);
  return std::unique_ptr<TfRecordWriter>(new TfRecordWriter(path, f));
}

TfRecordWriter::~TfRecordWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void AppendTfRecordFrame(absl::string_view record, std::string* out) {
  const uint64_t length = record.size();
  const uint32_t length_crc = MaskCrc(Crc32c(&length, 8));
  const uint32_t data_crc = MaskCrc(Crc32c(record.data(), record.size()));
  out->append(reinterpret_cast<const char*>(&length), 8);
  out->append(reinterpret_cast<const char*>(&length_crc), 4);
  out->append(record.data(), record.size());
  out->append(reinterpret_cast<const char*>(&data_crc), 4);
}

absl::Status TfRecordWriter::Write(absl::string_view record) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("write to closed file ", path_));
  }
  frame_.clear();
  AppendTfRecordFrame(record, &frame_);
  if (std::fwrite(frame_.data(), 1, frame_.size(), file_) != frame_.size()) {
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
