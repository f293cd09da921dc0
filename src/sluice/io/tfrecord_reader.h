// Reads TFRecord files: each record is framed as
//   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// (little-endian; see docs/formats.md). Both CRCs are checked on every record.
#ifndef SLUICE_IO_TFRECORD_READER_H_
#define SLUICE_IO_TFRECORD_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/io/corruption_log.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {

// Sequential reader over one file. A corrupt record is DataLoss naming the
// file and the byte offset of the record. With a CorruptionLog, corruption is
// skipped instead and logged there: a bad data CRC skips that record; a bad
// length CRC or a truncated frame skips the rest of the file, since the
// record boundaries after it cannot be trusted.
//
// Thread-compatible: one thread at a time.
class TfRecordReader {
 public:
  struct Options {
    // Not owned; when set, corrupt records are skipped and logged there.
    CorruptionLog* skip_log = nullptr;
    size_t buffer_bytes = size_t{1} << 20;
  };

  static absl::StatusOr<std::unique_ptr<TfRecordReader>> Open(const std::string& path,
                                                              Options options);
  static absl::StatusOr<std::unique_ptr<TfRecordReader>> Open(const std::string& path) {
    return Open(path, Options());
  }

  // Continues reading at `offset`, which is the start of record `record_index`.
  void Seek(uint64_t offset, int64_t record_index);

  // The next record, or nullopt at the end of the file. The view stays valid
  // until the next call.
  absl::StatusOr<std::optional<absl::string_view>> Next();

  const std::string& path() const { return file_->path(); }
  // Byte offset of the next record and its index.
  uint64_t offset() const { return offset_; }
  int64_t record_index() const { return record_index_; }

 private:
  TfRecordReader(std::unique_ptr<RandomAccessFile> file, Options options);
  // Makes bytes [offset_, offset_ + n) resident in buf_; returns how many of
  // them the file has (fewer only at its end).
  absl::StatusOr<size_t> Fill(size_t n);
  // Handles corruption at `offset`: an error, or (when skipping) a log entry.
  absl::Status Corrupt(absl::Status error, bool skip_rest_of_file, uint64_t next_offset);

  std::unique_ptr<RandomAccessFile> file_;
  Options options_;
  std::vector<uint8_t> buf_;
  uint64_t buf_start_ = 0;  // file offset of buf_[0]
  size_t buf_len_ = 0;
  uint64_t offset_ = 0;
  int64_t record_index_ = 0;
};

}  // namespace sluice::io

#endif  // SLUICE_IO_TFRECORD_READER_H_
