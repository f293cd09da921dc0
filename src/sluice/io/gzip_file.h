// A gzip- or zlib-compressed file read as its decompressed bytes: TFRecords
// written with TensorFlow's GZIP option (TFX writes them so by default) or
// its ZLIB option.
#ifndef SLUICE_IO_GZIP_FILE_H_
#define SLUICE_IO_GZIP_FILE_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sluice/io/gzip_inflater.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {

// size() is the decompressed size, found by decompressing the whole file
// at its first Open in the process (every member's CRC checked there) and
// kept by its path, compressed size and last 8 bytes (its last member's
// CRC and length). Reads forward decompress as they go; a read behind the
// last starts again from the file's start (readers of records read
// forward). A read that reaches the end checks that the data ends there
// and its last CRC, so a file changed since is an error, never a silent
// cut. Not mappable.
class GzipFile : public RandomAccessFile {
 public:
  // DataLoss naming the file when its gzip data is damaged or cut (such an
  // error answers IsDamage); a read error of the file as it is.
  static absl::StatusOr<std::unique_ptr<RandomAccessFile>> Open(std::unique_ptr<RandomAccessFile> compressed);

  absl::StatusOr<size_t> Read(uint64_t offset, size_t n, void* dst) const override;

  // Whether `status` is Open's error for damaged gzip data, not a failed read.
  static bool IsDamage(const absl::Status& status);

 private:
  GzipFile(std::unique_ptr<RandomAccessFile> compressed, uint64_t size);
  // n decompressed bytes into dst (nullptr: passed over); fewer at the end.
  absl::StatusOr<size_t> Inflate(size_t n, char* dst) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At size(): OK when the gzip data ends there too, its CRCs checked.
  absl::Status CheckEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<RandomAccessFile> compressed_;
  mutable absl::Mutex mu_;
  mutable std::unique_ptr<GzipInflater> inflater_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t position_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::vector<char> sink_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::io

#endif  // SLUICE_IO_GZIP_FILE_H_
