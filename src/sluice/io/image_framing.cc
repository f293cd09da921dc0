#include "sluice/io/image_framing.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sluice::io {
namespace {

constexpr char kPng[8] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
constexpr absl::string_view kTruncatedJpeg = "truncated JPEG (no end-of-image marker)";
constexpr absl::string_view kTruncatedPng = "truncated PNG (no IEND chunk)";
constexpr absl::string_view kDecoded =
    "not a JPEG, PNG, WebP or binary netpbm (P5, P6) file (the formats the decode ops read)";

uint32_t BigEndian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

uint32_t LittleEndian32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// What a file the decoders do not read is, by its signature: "" when it
// is none of these.
absl::string_view ForeignFormat(absl::string_view head) {
  if (absl::StartsWith(head, "GIF8")) return "a GIF image";
  if (head.size() >= 10 && absl::StartsWith(head, "BM") && head.substr(6, 4) == absl::string_view("\0\0\0\0", 4)) {
    return "a BMP image";  // its reserved fields are zeros
  }
  if (absl::StartsWith(head, absl::string_view("II*\0", 4)) || absl::StartsWith(head, absl::string_view("MM\0*", 4)))
    return "a TIFF image";
  if (head.size() >= 12 && head.substr(4, 4) == "ftyp") return "an ISO media file (HEIC, AVIF or a video)";
  if (head.size() >= 3 && head[0] == 'P' && absl::ascii_isspace(head[2])) {
    if (head[1] >= '1' && head[1] <= '3') return "an ASCII netpbm image (P1 to P3)";
    if (head[1] == '4') return "a netpbm bitmap (P4)";
    if (head[1] == '7') return "a netpbm PAM image (P7)";
  }
  if (absl::StartsWith(head, "\xff\x4f\xff\x51") || absl::StartsWith(head, absl::string_view("\0\0\0\x0cjP", 6))) {
    return "a JPEG 2000 image";
  }
  return "";
}

std::string NotDecoded(absl::string_view head) {
  const absl::string_view foreign = ForeignFormat(head);
  return foreign.empty() ? std::string(kDecoded) : absl::StrCat(foreign, ", ", kDecoded);
}

// Whether the JPEG's marker segments, walked from its start, reach an
// end-of-image marker inside it. An EXIF thumbnail's own end marker lies
// inside an APP1 segment, which the walk steps over by its length; in
// entropy-coded data 0xFF is stuffed (FF00), so a marker there is real.
bool JpegReachesItsEnd(absl::string_view image) {
  const auto* b = reinterpret_cast<const unsigned char*>(image.data());
  const size_t n = image.size();
  size_t pos = 2;  // after the start-of-image marker
  while (pos + 1 < n) {
    if (b[pos] != 0xFF) return false;
    while (pos + 1 < n && b[pos + 1] == 0xFF) ++pos;  // fill bytes
    if (pos + 1 >= n) return false;
    const unsigned char marker = b[pos + 1];
    if (marker == 0xD9) return true;
    if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {  // no length
      pos += 2;
      continue;
    }
    if (pos + 3 >= n) return false;
    pos += 2 + BigEndian(b + pos + 2, 2);
    if (marker != 0xDA) continue;
    // The scan's data runs to the next marker that is no stuffed byte and
    // no restart marker.
    while (pos + 1 < n) {
      const void* ff = std::memchr(b + pos, 0xFF, n - pos - 1);
      if (ff == nullptr) return false;
      pos = static_cast<size_t>(static_cast<const unsigned char*>(ff) - b);
      const unsigned char next = b[pos + 1];
      if (next != 0x00 && next != 0xFF && !(next >= 0xD0 && next <= 0xD7)) break;
      pos += next == 0xFF ? 1 : 2;
    }
  }
  return false;
}

// Whether the PNG's chunks, walked from its signature, reach IEND inside it.
bool PngReachesItsEnd(absl::string_view image) {
  const auto* b = reinterpret_cast<const unsigned char*>(image.data());
  size_t pos = 8;
  while (pos + 12 <= image.size()) {
    if (std::memcmp(b + pos + 4, "IEND", 4) == 0) return true;
    pos += 12 + static_cast<size_t>(BigEndian(b + pos, 4));
  }
  return false;
}

}  // namespace

std::string ImageFramingProblem(absl::string_view head, absl::string_view tail, uint64_t size) {
  if (size == 0) return "an empty file, not an image";
  if (head.size() >= 3 && head[0] == 'P' && (head[1] == '5' || head[1] == '6') &&
      std::isspace(static_cast<unsigned char>(head[2]))) {
    return "";  // netpbm: raw pixels, no end marker; the header's size is checked on reading
  }
  if (head.size() >= 12 && head.substr(0, 4) == "RIFF" && head.substr(8, 4) == "WEBP") {
    // RIFF's size counts what follows its first 8 bytes; more after it is padding.
    const uint64_t declared = uint64_t{LittleEndian32(reinterpret_cast<const unsigned char*>(head.data()) + 4)} + 8;
    if (size >= declared) return "";
    return absl::StrCat("truncated WebP (", size, " bytes of the ", declared, " its header declares)");
  }
  if (head.size() < 8 || tail.size() < 4) return NotDecoded(head);
  if (head.substr(0, 3) == "\xff\xd8\xff") {
    // Encoders may pad after the end-of-image marker: look near the end.
    if (tail.find("\xff\xd9") != absl::string_view::npos) return "";
    return std::string(kTruncatedJpeg);
  }
  if (head.substr(0, 8) == absl::string_view(kPng, 8)) {
    if (tail.size() >= 8 && tail.substr(tail.size() - 8, 4) == "IEND") return "";
    return std::string(kTruncatedPng);
  }
  return NotDecoded(head);
}

std::string ImageFramingProblem(absl::string_view image) {
  std::string problem = ImageFramingProblem(
      image.substr(0, kFramingHead), image.substr(image.size() - std::min(image.size(), kFramingTail)), image.size());
  // Data after the end (a phone's appended video, a downloader's padding)
  // is no truncation: the walk, only when the quick look fails.
  if (problem == kTruncatedJpeg && JpegReachesItsEnd(image)) return "";
  if (problem == kTruncatedPng && PngReachesItsEnd(image)) return "";
  return problem;
}

}  // namespace sluice::io
