// libarchive reading an archive through a RandomAccessFile (a local file or
// an object in a store), a MiB per read, skipping unread members' data
// without reading it. A gzip-compressed archive is decompressed here, its
// CRCs checked (gzip_inflater.h); libarchive's own filters take the other
// compressions.
#ifndef SLUICE_IO_ARCHIVE_STREAM_H_
#define SLUICE_IO_ARCHIVE_STREAM_H_

#include <archive.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "sluice/io/gzip_inflater.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {

class ArchiveStream {
 public:
  explicit ArchiveStream(std::unique_ptr<RandomAccessFile> file) : file_(std::move(file)) {}
  ArchiveStream(const ArchiveStream&) = delete;
  ArchiveStream& operator=(const ArchiveStream&) = delete;

  // Opens `a` (its formats chosen) on this stream, which must outlive it.
  // An error naming the file when libarchive refuses it.
  absl::Status OpenArchive(archive* a);
  // The error of the last read that failed (the file's, not the archive's:
  // a store that went away is no damage to the data); OK if none did.
  const absl::Status& read_status() const { return read_status_; }
  // Whether a gzip file's data was found damaged (checked per member, at
  // its end: what was read before it went unchecked).
  bool gzip_damaged() const { return gzip_ != nullptr && gzip_->damaged(); }
  // Its message: what the damage is and near which compressed byte.
  std::string gzip_damage() const { return gzip_damaged() ? std::string(gzip_->damage().message()) : ""; }
  // Whether that damage follows the last gzip member: what was read checked out.
  bool gzip_damaged_after_its_data() const { return gzip_damaged() && gzip_->damaged_after_the_members(); }
  // After the archive's end: checks what is left of a compressed file (a
  // gzip's last CRC follows the tar's end marker). A read error is also
  // read_status().
  absl::Status Finish();

 private:
  static la_ssize_t Read(archive* a, void* self, const void** out);
  static la_int64_t Skip(archive* a, void* self, la_int64_t request);

  std::unique_ptr<RandomAccessFile> file_;
  std::unique_ptr<GzipInflater> gzip_;  // a gzip file's, else null
  uint64_t offset_ = 0;
  std::vector<char> buffer_ = std::vector<char>(1 << 20);
  absl::Status read_status_;
};

}  // namespace sluice::io

#endif  // SLUICE_IO_ARCHIVE_STREAM_H_
