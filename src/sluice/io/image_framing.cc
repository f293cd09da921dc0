#include "sluice/io/image_framing.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

namespace sluice::io {
namespace {

constexpr char kPng[8] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
constexpr absl::string_view kTruncatedJpeg = "truncated JPEG (no end-of-image marker)";
constexpr absl::string_view kTruncatedPng = "truncated PNG (no IEND chunk)";

uint32_t BigEndian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
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

std::string ImageFramingProblem(absl::string_view head, absl::string_view tail) {
  if (head.size() >= 3 && head[0] == 'P' && (head[1] == '5' || head[1] == '6') &&
      std::isspace(static_cast<unsigned char>(head[2]))) {
    return "";  // netpbm: raw pixels, no end marker; the header's size is checked on reading
  }
  if (head.size() < 8 || tail.size() < 4) return "not a JPEG, PNG or netpbm file";
  if (head.substr(0, 3) == "\xff\xd8\xff") {
    // Encoders may pad after the end-of-image marker: look near the end.
    if (tail.find("\xff\xd9") != absl::string_view::npos) return "";
    return std::string(kTruncatedJpeg);
  }
  if (head.substr(0, 8) == absl::string_view(kPng, 8)) {
    if (tail.size() >= 8 && tail.substr(tail.size() - 8, 4) == "IEND") return "";
    return std::string(kTruncatedPng);
  }
  return "not a JPEG, PNG or netpbm file";
}

std::string ImageFramingProblem(absl::string_view image) {
  std::string problem =
      ImageFramingProblem(image.substr(0, 8), image.substr(image.size() - std::min(image.size(), kFramingTail)));
  // Data after the end (a phone's appended video, a downloader's padding)
  // is no truncation: the walk, only when the quick look fails.
  if (problem == kTruncatedJpeg && JpegReachesItsEnd(image)) return "";
  if (problem == kTruncatedPng && PngReachesItsEnd(image)) return "";
  return problem;
}

}  // namespace sluice::io
