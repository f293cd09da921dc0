#include "sluice/io/image_framing.h"

#include <algorithm>
#include <cctype>

namespace sluice::io {

std::string ImageFramingProblem(absl::string_view head, absl::string_view tail) {
  static const char kPng[8] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
  if (head.size() >= 3 && head[0] == 'P' && (head[1] == '5' || head[1] == '6') &&
      std::isspace(static_cast<unsigned char>(head[2]))) {
    return "";  // netpbm: raw pixels, no end marker; the header's size is checked on reading
  }
  if (head.size() < 8 || tail.size() < 4) return "not a JPEG, PNG or netpbm file";
  if (head.substr(0, 3) == "\xff\xd8\xff") {
    // Encoders may pad after the end-of-image marker: look near the end.
    if (tail.find("\xff\xd9") != absl::string_view::npos) return "";
    return "truncated JPEG (no end-of-image marker)";
  }
  if (head.substr(0, 8) == absl::string_view(kPng, 8)) {
    if (tail.size() >= 8 && tail.substr(tail.size() - 8, 4) == "IEND") return "";
    return "truncated PNG (no IEND chunk)";
  }
  return "not a JPEG, PNG or netpbm file";
}

std::string ImageFramingProblem(absl::string_view image) {
  return ImageFramingProblem(image.substr(0, 8), image.substr(image.size() - std::min(image.size(), kFramingTail)));
}

}  // namespace sluice::io
