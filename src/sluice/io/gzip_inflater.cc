#include "sluice/io/gzip_inflater.h"

#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"

namespace sluice::io {
namespace {

const char* InflateProblem(int code, bool zlib) {
  switch (code) {
    case ISAL_INVALID_BLOCK:
      return "an invalid deflate block";
    case ISAL_INVALID_SYMBOL:
      return "an invalid deflate code";
    case ISAL_INVALID_LOOKBACK:
      return "a back-reference before the data's start";
    case ISAL_INVALID_WRAPPER:
      return zlib ? "an invalid zlib header" : "an invalid gzip header";
    case ISAL_UNSUPPORTED_METHOD:
      return "a compression method other than deflate";
    case ISAL_INCORRECT_CHECKSUM:
      return zlib ? "the stream's Adler-32 differs from its data's: a byte within it is damaged"
                  : "the member's CRC or length differ from its data's: a byte within it is damaged";
    default:
      return "an error decompressing it";
  }
}

}  // namespace

bool IsGzip(const char* head, size_t n) {
  return n >= 3 && static_cast<uint8_t>(head[0]) == 0x1f && static_cast<uint8_t>(head[1]) == 0x8b && head[2] == 8;
}

absl::StatusOr<bool> IsGzipFile(const RandomAccessFile& file) {
  char head[3];
  SLUICE_ASSIGN_OR_RETURN(const size_t got, file.Read(0, sizeof(head), head));
  return IsGzip(head, got);
}

bool IsZlib(const char* head, size_t n) {
  if (n < 2) return false;
  const uint8_t method = static_cast<uint8_t>(head[0]), flags = static_cast<uint8_t>(head[1]);
  const bool deflate = (method & 0x0f) == 8 && (method >> 4) <= 7;
  return deflate && (method * 256 + flags) % 31 == 0 && (flags & 0x20) == 0;
}

GzipInflater::GzipInflater(const RandomAccessFile* file) : file_(file), state_(std::make_unique<inflate_state>()) {
  isal_inflate_init(state_.get());
  state_->crc_flag = ISAL_GZIP;
}

absl::Status GzipInflater::Start() {
  started_ = true;
  SLUICE_RETURN_IF_ERROR(Refill());
  const inflate_state& s = *state_;
  const auto* head = reinterpret_cast<const char*>(s.next_in);
  zlib_ = !IsGzip(head, s.avail_in) && IsZlib(head, s.avail_in);
  if (zlib_) state_->crc_flag = ISAL_ZLIB;
  return absl::OkStatus();
}

GzipInflater::~GzipInflater() = default;

absl::StatusOr<size_t> GzipInflater::Read(char* out, size_t n) {
  if (!damage_.ok()) return damage_;  // ISA-L would go on past a member whose CRC failed
  if (!started_) SLUICE_RETURN_IF_ERROR(Start());
  inflate_state& s = *state_;
  s.next_out = reinterpret_cast<uint8_t*>(out);
  s.avail_out = static_cast<uint32_t>(std::min<size_t>(n, UINT32_MAX));
  const uint32_t asked = s.avail_out;
  while (s.avail_out > 0 && !ended_) {
    if (s.block_state == ISAL_BLOCK_FINISH) {
      const absl::Status next = NextMember();
      // What the member before it held checked out (its CRC): handed on
      // first, as below; the next read says what followed it.
      if (!next.ok()) return s.avail_out < asked ? absl::StatusOr<size_t>(asked - s.avail_out) : next;
      continue;
    }
    if (s.avail_in == 0) SLUICE_RETURN_IF_ERROR(Refill());
    const uint32_t in_before = s.avail_in, out_before = s.avail_out;
    const int code = isal_inflate(&s);
    const bool stuck = s.avail_in == in_before && s.avail_out == out_before;
    const bool cut = stuck && s.block_state != ISAL_BLOCK_FINISH && read_offset_ >= file_->size();
    if (code < 0 || cut) {
      const absl::Status damage = Damage(code < 0 ? InflateProblem(code, zlib_)
                                         : zlib_  ? "the file ends within the zlib stream (truncated)"
                                                  : "the file ends within a gzip member (truncated)");
      // The bytes inflated before it are handed on (a shard's samples
      // before the damage); the next read says it.
      if (s.avail_out < asked) return asked - s.avail_out;
      return damage;
    }
  }
  return asked - s.avail_out;
}

absl::Status GzipInflater::Finish() {
  std::vector<char> sink(1 << 16);
  while (!ended_) {
    SLUICE_ASSIGN_OR_RETURN(size_t got, Read(sink.data(), sink.size()));
    (void)got;
  }
  return absl::OkStatus();
}

absl::Status GzipInflater::Refill() {
  inflate_state& s = *state_;
  const size_t left = s.avail_in;
  if (left > 0 && s.next_in != input_.data()) std::memmove(input_.data(), s.next_in, left);
  input_offset_ = read_offset_ - left;
  size_t got = 0;
  if (read_offset_ < file_->size()) {
    SLUICE_ASSIGN_OR_RETURN(got, file_->Read(read_offset_, input_.size() - left, input_.data() + left));
  }
  read_offset_ += got;
  s.next_in = input_.data();
  s.avail_in = static_cast<uint32_t>(left + got);
  return absl::OkStatus();
}

// After a member's end: another member, zeros to the end (as gzip(1)
// allows), or damage. A zlib stream is one: zeros or damage.
absl::Status GzipInflater::NextMember() {
  inflate_state& s = *state_;
  // Bytes the inflater took in past the end and did not use (a zlib
  // stream's end, whose trailer is 4 bytes, leaves up to 2 there).
  const int bits = std::clamp(s.read_in_length, 0, 64);
  const uint64_t unused = bits == 0 ? 0 : s.read_in & (~uint64_t{0} >> (64 - bits));
  if (unused != 0) {
    return DamageAfterTheMembers();
  }
  if (s.avail_in < 3) SLUICE_RETURN_IF_ERROR(Refill());
  if (s.avail_in == 0) {
    ended_ = true;
    return absl::OkStatus();
  }
  if (!zlib_ && IsGzip(reinterpret_cast<const char*>(s.next_in), s.avail_in)) {
    uint8_t* next_in = s.next_in;
    const uint32_t avail_in = s.avail_in;
    isal_inflate_reset(&s);
    s.crc_flag = ISAL_GZIP;
    s.next_in = next_in;
    s.avail_in = avail_in;
    return absl::OkStatus();
  }
  while (s.avail_in > 0) {
    if (std::any_of(s.next_in, s.next_in + s.avail_in, [](uint8_t b) { return b != 0; })) {
      return DamageAfterTheMembers();
    }
    s.next_in += s.avail_in;
    s.avail_in = 0;
    SLUICE_RETURN_IF_ERROR(Refill());
  }
  ended_ = true;
  return absl::OkStatus();
}

absl::Status GzipInflater::DamageAfterTheMembers() {
  after_the_members_ = true;
  return Damage(zlib_ ? "bytes after the zlib stream" : "bytes after the last gzip member that start no member");
}

absl::Status GzipInflater::Damage(const std::string& what) {
  // Less the whole bytes taken in and not yet used.
  const uint64_t taken = input_offset_ + static_cast<uint64_t>(state_->next_in - input_.data());
  const uint64_t at = taken - std::min<uint64_t>(taken, static_cast<uint64_t>(std::max(0, state_->read_in_length)) / 8);
  return damage_ = absl::DataLossError(
             absl::StrCat(zlib_ ? "zlib" : "gzip", " data is damaged near compressed byte ", at, ": ", what));
}

}  // namespace sluice::io
