#include "sluice/io/tfrecord_reader.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/crc32c.h"

namespace sluice::io {
namespace {

constexpr size_t kHeaderBytes = 12;  // length + masked CRC of the length
constexpr size_t kFooterBytes = 4;   // masked CRC of the data

uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TfRecordReader>> TfRecordReader::Open(const std::string& path,
                                                                      Options options) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, RandomAccessFile::Open(path));
  return std::unique_ptr<TfRecordReader>(new TfRecordReader(std::move(file), options));
}

TfRecordReader::TfRecordReader(std::unique_ptr<RandomAccessFile> file, Options options)
    : file_(std::move(file)), options_(options) {
  buf_.resize(options_.buffer_bytes);
}

void TfRecordReader::Seek(uint64_t offset, int64_t record_index) {
  offset_ = offset;
  record_index_ = record_index;
  if (offset < buf_start_ || offset > buf_start_ + buf_len_) {
    buf_start_ = offset;
    buf_len_ = 0;
  }
}

absl::StatusOr<size_t> TfRecordReader::Fill(size_t n) {
  const uint64_t end = buf_start_ + buf_len_;
  if (offset_ + n <= end) return n;
  // Keep the unread tail, then read behind it.
  const size_t keep = static_cast<size_t>(end - offset_);
  std::memmove(buf_.data(), buf_.data() + (offset_ - buf_start_), keep);
  buf_start_ = offset_;
  buf_len_ = keep;
  if (n > buf_.size()) buf_.resize(n);
  SLUICE_ASSIGN_OR_RETURN(
      size_t got, file_->Read(buf_start_ + buf_len_, buf_.size() - buf_len_, buf_.data() + buf_len_));
  buf_len_ += got;
  return std::min(n, buf_len_);
}

absl::Status TfRecordReader::Corrupt(absl::Status error, bool skip_rest_of_file,
                                     uint64_t next_offset) {
  if (options_.skip_log == nullptr) return error;
  if (skip_rest_of_file) {
    options_.skip_log->Add(1, absl::StrCat(error.message(), " (skipped the rest of the file)"));
    offset_ = file_->size();
  } else {
    options_.skip_log->Add(1, std::string(error.message()));
    offset_ = next_offset;
    ++record_index_;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<absl::string_view>> TfRecordReader::Next() {
  while (true) {
    if (offset_ >= file_->size()) return std::optional<absl::string_view>();
    const uint64_t start = offset_;
    SLUICE_ASSIGN_OR_RETURN(size_t have, Fill(kHeaderBytes));
    if (have < kHeaderBytes) {
      SLUICE_RETURN_IF_ERROR(Corrupt(
          absl::DataLossError(absl::StrCat("truncated record header in ", path(), " at offset ",
                                           start, ": ", have, " of 12 bytes")),
          true, 0));
      continue;
    }
    const uint8_t* header = buf_.data() + (start - buf_start_);
    const uint64_t length = LoadU64(header);
    if (UnmaskCrc(LoadU32(header + 8)) != Crc32c(header, 8)) {
      SLUICE_RETURN_IF_ERROR(Corrupt(
          absl::DataLossError(absl::StrCat(
              "corrupted record (length crc mismatch) in ", path(), " at offset ", start,
              start == 0 ? " (is this a TFRecord file?)" : "")),
          true, 0));
      continue;
    }
    const uint64_t frame = kHeaderBytes + length + kFooterBytes;
    if (length > file_->size() - start || frame > file_->size() - start) {
      SLUICE_RETURN_IF_ERROR(Corrupt(
          absl::DataLossError(absl::StrCat("truncated record in ", path(), " at offset ", start,
                                           ": frame of ", frame, " bytes, file has ",
                                           file_->size() - start, " left")),
          true, 0));
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(have, Fill(frame));
    if (have < frame) {
      return absl::DataLossError(absl::StrCat("file ", path(), " shrank while reading at offset ",
                                              start));
    }
    const uint8_t* data = buf_.data() + (start - buf_start_) + kHeaderBytes;
    if (UnmaskCrc(LoadU32(data + length)) != Crc32c(data, length)) {
      SLUICE_RETURN_IF_ERROR(Corrupt(
          absl::DataLossError(absl::StrCat("corrupted record (data crc mismatch) in ", path(),
                                           " at offset ", start)),
          false, start + frame));
      continue;
    }
    offset_ = start + frame;
    ++record_index_;
    return std::optional<absl::string_view>(
        absl::string_view(reinterpret_cast<const char*>(data), length));
  }
}

}  // namespace sluice::io
