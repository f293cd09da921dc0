#include "sluice/io/tfrecord_reader.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/crc32c.h"
#include "sluice/io/gzip_file.h"
#include "sluice/io/gzip_inflater.h"

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

bool HeaderChecks(const uint8_t* header) { return UnmaskCrc(LoadU32(header + 8)) == Crc32c(header, 8); }

// Whether `file`, which starts like a zlib stream, is a ZLIB TFRecord: its
// first 12 bytes decompress to a record's header (or it holds fewer). About
// one plain record length in a thousand starts like a zlib header too, and
// a plain file whose first record is damaged is read as plain (resynced
// under "skip"), not refused whole as damaged zlib data.
bool InflatesToRecords(const RandomAccessFile& file) {
  GzipInflater inflater(&file);
  uint8_t header[kHeaderBytes];
  size_t got = 0;
  while (got < kHeaderBytes) {
    const absl::StatusOr<size_t> more = inflater.Read(reinterpret_cast<char*>(header) + got, kHeaderBytes - got);
    if (!more.ok()) return false;
    if (*more == 0) return true;  // no record, or a truncated one: the reader says which
    got += *more;
  }
  return HeaderChecks(header);
}

// Why a file's first frame does not check, from its first bytes.
std::string FirstFrameHint(const uint8_t* head) {
  if (head[0] == 0x78 && (head[0] * 256 + head[1]) % 31 == 0) {
    return " (it starts like a zlib stream that does not decompress to TFRecords: if it is a ZLIB TFRecord file, "
           "its zlib data is damaged or uses a preset dictionary, which TensorFlow's ZLIB option never writes)";
  }
  return " (is this a TFRecord file?)";
}

}  // namespace

absl::StatusOr<bool> IsCompressedTfRecord(const RandomAccessFile& file) {
  uint8_t head[kHeaderBytes];
  SLUICE_ASSIGN_OR_RETURN(const size_t got, file.Read(0, sizeof(head), head));
  if (got == kHeaderBytes && HeaderChecks(head)) return false;
  const auto* start = reinterpret_cast<const char*>(head);
  return IsGzip(start, got) || (IsZlib(start, got) && InflatesToRecords(file));
}

absl::StatusOr<std::unique_ptr<TfRecordReader>> TfRecordReader::Open(const std::string& path, Options options) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, RandomAccessFile::Open(path));
  SLUICE_ASSIGN_OR_RETURN(const bool compressed, IsCompressedTfRecord(*file));
  // TensorFlow's GZIP and ZLIB options: its records are framed within the
  // decompressed bytes.
  if (compressed) {
    SLUICE_ASSIGN_OR_RETURN(file, GzipFile::Open(std::move(file)));
  }
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

void TfRecordReader::SetEnd(uint64_t end_offset) { end_offset_ = end_offset; }

uint64_t TfRecordReader::end() const { return std::min(end_offset_, file_->size()); }

absl::StatusOr<size_t> TfRecordReader::Fill(size_t n) {
  const uint64_t end = buf_start_ + buf_len_;
  if (offset_ + n <= end) return n;
  // Keep the unread tail, then read behind it.
  const size_t keep = static_cast<size_t>(end - offset_);
  std::memmove(buf_.data(), buf_.data() + (offset_ - buf_start_), keep);
  buf_start_ = offset_;
  buf_len_ = keep;
  if (n > buf_.size()) buf_.resize(n);
  SLUICE_ASSIGN_OR_RETURN(size_t got,
                          file_->Read(buf_start_ + buf_len_, buf_.size() - buf_len_, buf_.data() + buf_len_));
  buf_len_ += got;
  return std::min(n, buf_len_);
}

absl::StatusOr<TfRecordReader::Frame> TfRecordReader::CheckFrame(uint64_t* length) {
  SLUICE_ASSIGN_OR_RETURN(size_t have, Fill(kHeaderBytes));
  if (have < kHeaderBytes) return Frame::kTruncatedHeader;
  const uint8_t* header = buf_.data() + (offset_ - buf_start_);
  if (UnmaskCrc(LoadU32(header + 8)) != Crc32c(header, 8)) return Frame::kBadLengthCrc;
  *length = LoadU64(header);
  const uint64_t left = file_->size() - offset_;
  if (*length > left || kHeaderBytes + *length + kFooterBytes > left) return Frame::kTruncatedFrame;
  const size_t frame = kHeaderBytes + *length + kFooterBytes;
  SLUICE_ASSIGN_OR_RETURN(have, Fill(frame));
  if (have < frame) {
    return absl::DataLossError(absl::StrCat("file ", path(), " shrank while reading at offset ", offset_));
  }
  const uint8_t* data = buf_.data() + (offset_ - buf_start_) + kHeaderBytes;
  return UnmaskCrc(LoadU32(data + *length)) == Crc32c(data, *length) ? Frame::kOk : Frame::kBadDataCrc;
}

absl::StatusOr<uint64_t> TfRecordReader::Resync(uint64_t from) {
  // A candidate needs its 4-byte length CRC to match (a false match once in
  // 2^32 offsets) and then its data CRC: a record is never invented.
  for (offset_ = from; offset_ < end(); ++offset_) {
    uint64_t length = 0;
    SLUICE_ASSIGN_OR_RETURN(Frame frame, CheckFrame(&length));
    if (frame == Frame::kOk) return offset_;
    if (frame == Frame::kTruncatedHeader) break;
  }
  return end();
}

absl::Status TfRecordReader::Corrupt(const absl::Status& error, uint64_t start, uint64_t next) {
  if (options_.skip_log == nullptr) return error;
  // What lies past end() is the next split's to read or skip.
  next = std::min(next, end());
  int64_t records = 1;
  int64_t next_index = record_index_ + 1;
  if (options_.record_offsets != nullptr) {
    const std::vector<uint64_t>& offsets = *options_.record_offsets;
    next_index = std::lower_bound(offsets.begin(), offsets.end(), next) - offsets.begin();
    records = std::max<int64_t>(1, next_index - record_index_);
  }
  std::string message(error.message());
  if (next == file_->size()) {
    absl::StrAppend(&message, " (skipped the rest of the file, ", next - start, " bytes)");
  } else if (next == end_offset_) {
    absl::StrAppend(&message, " (skipped the rest of the split, ", next - start, " bytes)");
  } else {
    absl::StrAppend(&message, " (skipped ", next - start, " bytes, to the record at offset ", next, ")");
  }
  options_.skip_log->Add(path(), records, next - start, std::move(message));
  Seek(next, next_index);
  return absl::OkStatus();
}

absl::Status TfRecordReader::Skip(int64_t records) {
  const int64_t target = record_index_ + records;
  bool tried_mapping = false;
  while (record_index_ < target && offset_ < end()) {
    // Headers past the buffer are read where the kernel maps a local file,
    // once per call: copying W2's 6,144 records (19 MB) through the buffer
    // to find them took 6 ms. A short pass within the buffer maps nothing.
    if (!tried_mapping && offset_ + kHeaderBytes > buf_start_ + buf_len_) {
      tried_mapping = true;
      absl::StatusOr<std::shared_ptr<const FileMapping>> mapping = file_->Map();
      if (mapping.ok()) {
        SkipMapped(**mapping, target);
        continue;
      }
    }
    SLUICE_ASSIGN_OR_RETURN(const size_t have, Fill(kHeaderBytes));
    const std::optional<uint64_t> next =
        have == kHeaderBytes ? FrameEnd(buf_.data() + (offset_ - buf_start_), offset_) : std::nullopt;
    if (next) {
      Seek(*next, record_index_ + 1);
    } else {
      SLUICE_RETURN_IF_ERROR(Step().status());
    }
  }
  return absl::OkStatus();
}

std::optional<uint64_t> TfRecordReader::FrameEnd(const uint8_t* header, uint64_t at) const {
  if (UnmaskCrc(LoadU32(header + 8)) != Crc32c(header, 8)) return std::nullopt;
  const uint64_t length = LoadU64(header);
  const uint64_t left = file_->size() - at;
  if (length > left || kHeaderBytes + length + kFooterBytes > left) return std::nullopt;
  return at + kHeaderBytes + length + kFooterBytes;
}

void TfRecordReader::SkipMapped(const FileMapping& file, int64_t target) {
  if (!file_->CheckHolds(file.size()).ok()) return;  // cut shorter: reading says how
  uint64_t at = offset_;
  int64_t index = record_index_;
  const uint64_t stop = std::min<uint64_t>(end(), file.size());
  while (index < target && at < stop && file.size() - at >= kHeaderBytes) {
    const std::optional<uint64_t> next = FrameEnd(file.data() + at, at);
    if (!next) break;
    at = *next;
    ++index;
  }
  Seek(at, index);
}

absl::StatusOr<std::optional<absl::string_view>> TfRecordReader::Next() {
  while (offset_ < end()) {
    SLUICE_ASSIGN_OR_RETURN(std::optional<absl::string_view> record, Step());
    if (record) return record;
  }
  return std::optional<absl::string_view>();
}

absl::StatusOr<std::optional<absl::string_view>> TfRecordReader::Step() {
  const uint64_t start = offset_;
  uint64_t length = 0;
  SLUICE_ASSIGN_OR_RETURN(Frame frame, CheckFrame(&length));
  const auto where = [&] { return absl::StrCat(" in ", path(), " at offset ", start); };
  switch (frame) {
    case Frame::kOk:
      offset_ = start + kHeaderBytes + length + kFooterBytes;
      ++record_index_;
      return std::optional<absl::string_view>(
          absl::string_view(reinterpret_cast<const char*>(buf_.data() + (start - buf_start_) + kHeaderBytes), length));
    case Frame::kTruncatedHeader:
      SLUICE_RETURN_IF_ERROR(Corrupt(absl::DataLossError(absl::StrCat("truncated record header", where(), ": ",
                                                                      file_->size() - start, " of 12 bytes")),
                                     start, file_->size()));
      break;
    case Frame::kTruncatedFrame:
      SLUICE_RETURN_IF_ERROR(
          Corrupt(absl::DataLossError(absl::StrCat("truncated record", where(), ": its header declares ", length,
                                                   " bytes of data, the file has ", file_->size() - start,
                                                   " left for the whole frame")),
                  start, file_->size()));
      break;
    case Frame::kBadDataCrc:
      SLUICE_RETURN_IF_ERROR(Corrupt(absl::DataLossError(absl::StrCat("corrupted record (data crc mismatch)", where())),
                                     start, start + kHeaderBytes + length + kFooterBytes));
      break;
    case Frame::kBadLengthCrc: {
      const absl::Status error =
          absl::DataLossError(absl::StrCat("corrupted record (length crc mismatch)", where(),
                                           start == 0 ? FirstFrameHint(buf_.data() + (start - buf_start_)) : ""));
      if (options_.skip_log == nullptr) return error;
      SLUICE_ASSIGN_OR_RETURN(uint64_t next, Resync(start + 1));
      SLUICE_RETURN_IF_ERROR(Corrupt(error, start, next));
      break;
    }
  }
  return std::optional<absl::string_view>();
}

}  // namespace sluice::io
