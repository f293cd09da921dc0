#include "sluice/io/archive_stream.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"

namespace sluice::io {

absl::Status ArchiveStream::OpenArchive(archive* a) {
  if (file_->size() == 0) return absl::DataLossError(absl::StrCat("cannot read ", file_->path(), ": an empty file"));
  absl::StatusOr<bool> gzip = IsGzipFile(*file_);
  if (!gzip.ok()) return read_status_ = gzip.status();
  if (*gzip) gzip_ = std::make_unique<GzipInflater>(file_.get());
  archive_read_set_read_callback(a, &ArchiveStream::Read);
  archive_read_set_skip_callback(a, &ArchiveStream::Skip);
  archive_read_set_callback_data(a, this);
  if (archive_read_open1(a) == ARCHIVE_OK) return absl::OkStatus();
  if (!read_status_.ok()) return read_status_;
  const char* why = archive_error_string(a);
  return absl::DataLossError(absl::StrCat("cannot read ", file_->path(), " as an archive: ", why ? why : "unknown"));
}

absl::Status ArchiveStream::Finish() {
  if (gzip_ == nullptr) return absl::OkStatus();
  absl::Status finished = gzip_->Finish();
  if (!finished.ok() && !gzip_->damaged()) read_status_ = finished;
  return finished;
}

la_ssize_t ArchiveStream::Read(archive* a, void* self, const void** out) {
  auto* s = static_cast<ArchiveStream*>(self);
  absl::StatusOr<size_t> got = s->gzip_ ? s->gzip_->Read(s->buffer_.data(), s->buffer_.size())
                                        : s->file_->Read(s->offset_, s->buffer_.size(), s->buffer_.data());
  if (!got.ok()) {
    // Damage is the archive's error (libarchive reports it); a failed read
    // is the file's.
    if (s->gzip_ == nullptr || !s->gzip_->damaged()) s->read_status_ = got.status();
    archive_set_error(a, s->read_status_.ok() ? EILSEQ : EIO, "%s", std::string(got.status().message()).c_str());
    return -1;
  }
  s->offset_ += *got;
  *out = s->buffer_.data();
  return static_cast<la_ssize_t>(*got);
}

la_int64_t ArchiveStream::Skip(archive*, void* self, la_int64_t request) {
  auto* s = static_cast<ArchiveStream*>(self);
  if (s->gzip_ != nullptr) return 0;  // a compressed stream is read through
  const uint64_t left = s->file_->size() - std::min(s->offset_, s->file_->size());
  const uint64_t skipped = std::min<uint64_t>(static_cast<uint64_t>(std::max<la_int64_t>(request, 0)), left);
  s->offset_ += skipped;
  return static_cast<la_int64_t>(skipped);
}

}  // namespace sluice::io
