// A gzip file's bytes decompressed (ISA-L's igzip), each member's CRC and
// length checked at its end. libarchive's gzip filter checks neither, so a
// flipped byte in a stored block of a .tar.gz came through unseen. A file
// that starts a zlib stream instead (TensorFlow's ZLIB TFRecords) is read
// as that one stream, its Adler-32 checked.
#ifndef SLUICE_IO_GZIP_INFLATER_H_
#define SLUICE_IO_GZIP_INFLATER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/io/random_access_file.h"

struct inflate_state;

namespace sluice::io {

// True when `head` (a file's first bytes) starts a gzip member (its magic
// and deflate's method byte).
bool IsGzip(const char* head, size_t n);
// Whether `file` starts a gzip member (its read's error as it is).
absl::StatusOr<bool> IsGzipFile(const RandomAccessFile& file);
// True when `head` starts a zlib stream (RFC 1950: deflate, a header whose
// check bits hold, no preset dictionary).
bool IsZlib(const char* head, size_t n);

class GzipInflater {
 public:
  // Reads `file`, which must outlive it.
  explicit GzipInflater(const RandomAccessFile* file);
  ~GzipInflater();
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;

  // Up to n decompressed bytes into out; 0 once every member was read and
  // checked. A read error of the file as it is; damage (a bad deflate
  // block, a CRC or length that differ, the file ending within a member,
  // bytes after the last member) DataLoss saying what and at which
  // compressed byte (the caller names the file).
  absl::StatusOr<size_t> Read(char* out, size_t n);
  // Decompresses what is left unread (the bytes after a tar's end marker),
  // checking it as Read does.
  absl::Status Finish();
  // Whether an error came from damage rather than from reading: every
  // later Read returns it again.
  bool damaged() const { return !damage_.ok(); }
  // The damage found (OK when none): what and at which compressed byte.
  const absl::Status& damage() const { return damage_; }
  // Whether the damage follows the last member (whose CRC checked out):
  // what was read is whole.
  bool damaged_after_the_members() const { return after_the_members_; }

 private:
  absl::Status Refill();
  // Reads the first bytes and sets the wrapper they start.
  absl::Status Start();
  absl::Status NextMember();
  absl::Status Damage(const std::string& what);
  absl::Status DamageAfterTheMembers();

  const RandomAccessFile* file_;
  std::unique_ptr<inflate_state> state_;
  std::vector<uint8_t> input_ = std::vector<uint8_t>(1 << 20);
  uint64_t input_offset_ = 0;  // the file's offset of input_[0]
  uint64_t read_offset_ = 0;   // the file's offset read up to
  bool started_ = false;
  bool zlib_ = false;  // a zlib stream, not gzip members
  bool ended_ = false;
  absl::Status damage_;
  bool after_the_members_ = false;
};

}  // namespace sluice::io

#endif  // SLUICE_IO_GZIP_INFLATER_H_
