// Reads TFRecord files: each record is framed as
//   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// (little-endian; see docs/formats.md). Both CRCs are checked on every record.
#ifndef SLUICE_IO_TFRECORD_READER_H_
#define SLUICE_IO_TFRECORD_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sluice/io/corruption_log.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {

// Whether `file` is a TFRecord file compressed with TensorFlow's GZIP or
// ZLIB option: it starts a gzip member or a zlib stream, and not a record
// (a plain file whose first record is 35,615 bytes long starts with gzip's
// magic too).
absl::StatusOr<bool> IsCompressedTfRecord(const RandomAccessFile& file);

// Sequential reader over one file. A corrupt record is DataLoss naming the
// file and the byte offset of the record. With a CorruptionLog, corruption is
// skipped instead and logged there (records and bytes): a bad data CRC skips
// that record (its length checked, so the next frame is known); a bad length
// CRC resynchronizes, scanning forward for the next offset where a length,
// its CRC and the data CRC all check, so one damaged record costs one record;
// a frame running past the end of the file (truncation) skips the rest.
//
// Thread-compatible: one thread at a time.
class TfRecordReader {
 public:
  struct Options {
    // Not owned; when set, corrupt records are skipped and logged there.
    CorruptionLog* skip_log = nullptr;
    // Not owned; the file's record offsets from its index, when it has one:
    // record numbers stay exact across a resynchronization (without it, the
    // damaged stretch counts as one record).
    const std::vector<uint64_t>* record_offsets = nullptr;
    size_t buffer_bytes = size_t{1} << 20;
  };

  static absl::StatusOr<std::unique_ptr<TfRecordReader>> Open(const std::string& path, Options options);
  static absl::StatusOr<std::unique_ptr<TfRecordReader>> Open(const std::string& path) { return Open(path, Options()); }

  // Continues reading at `offset`, which is the start of record `record_index`.
  void Seek(uint64_t offset, int64_t record_index);
  // Moves past the next `records` records reading only their headers (a
  // resumed split passes over records read before); a damaged frame is
  // handled as Next() handles it (a corrupt record counts as reading counts it).
  absl::Status Skip(int64_t records);
  // Reads no record at or after `end_offset` (where the next split starts):
  // a damaged stretch that crosses it is skipped and counted up to it only.
  void SetEnd(uint64_t end_offset);

  // The next record, or nullopt at the end of the file. The view stays valid
  // until the next call.
  absl::StatusOr<std::optional<absl::string_view>> Next();

  const std::string& path() const { return file_->path(); }
  // Byte offset of the next record and its index.
  uint64_t offset() const { return offset_; }
  int64_t record_index() const { return record_index_; }

 private:
  TfRecordReader(std::unique_ptr<RandomAccessFile> file, Options options);
  enum class Frame { kOk, kTruncatedHeader, kBadLengthCrc, kTruncatedFrame, kBadDataCrc };

  // Makes bytes [offset_, offset_ + n) resident in buf_; returns how many of
  // them the file has (fewer only at its end).
  absl::StatusOr<size_t> Fill(size_t n);
  // Checks the frame at offset_, leaving it resident; sets *length when the
  // length's CRC checks.
  absl::StatusOr<Frame> CheckFrame(uint64_t* length);
  // The first offset in [from, end()) where a whole frame checks, or end()
  // when none does.
  absl::StatusOr<uint64_t> Resync(uint64_t from);
  uint64_t end() const;
  // Handles the corrupt frame at `start`: an error, or (when skipping) a log
  // entry and a move to `next`, the offset reading goes on from.
  absl::Status Corrupt(const absl::Status& error, uint64_t start, uint64_t next);
  // Where the frame at `at`, whose 12 header bytes are `header`, ends: when
  // its length's CRC checks and the frame fits in the file.
  std::optional<uint64_t> FrameEnd(const uint8_t* header, uint64_t at) const;
  // Skip's walk over a mapped file's headers towards record `target`: it
  // stops at the first frame it cannot pass (damaged, cut short), which the
  // buffered walk then handles as reading does.
  void SkipMapped(const FileMapping& file, int64_t target);
  // Reads the frame at offset_: its record, or nullopt when it was corrupt
  // and passed over (or an error, when not skipping).
  absl::StatusOr<std::optional<absl::string_view>> Step();

  std::unique_ptr<RandomAccessFile> file_;
  Options options_;
  std::vector<uint8_t> buf_;
  uint64_t buf_start_ = 0;  // file offset of buf_[0]
  size_t buf_len_ = 0;
  uint64_t offset_ = 0;
  int64_t record_index_ = 0;
  uint64_t end_offset_ = UINT64_MAX;
};

}  // namespace sluice::io

#endif  // SLUICE_IO_TFRECORD_READER_H_
