#include "sluice/kernels/netpbm.h"

#include <cctype>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace sluice::kernels {
namespace {

// The header's next decimal field after whitespace and '#' comments;
// -1 when there is none.
int64_t NextField(absl::string_view bytes, size_t* at) {
  while (*at < bytes.size()) {
    const char c = bytes[*at];
    if (c == '#') {
      while (*at < bytes.size() && bytes[*at] != '\n') ++*at;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++*at;
    } else {
      break;
    }
  }
  int64_t value = 0;
  const size_t start = *at;
  while (*at < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[*at]))) {
    if (*at - start == 9) return -1;  // a billion or more: no image is that wide
    value = value * 10 + (bytes[*at] - '0');
    ++*at;
  }
  return *at == start ? -1 : value;
}

}  // namespace

bool IsNetpbm(absl::string_view bytes) {
  return bytes.size() >= 3 && bytes[0] == 'P' && (bytes[1] == '5' || bytes[1] == '6') &&
         std::isspace(static_cast<unsigned char>(bytes[2]));
}

absl::StatusOr<NetpbmHeader> ReadNetpbmHeader(absl::string_view bytes) {
  if (!IsNetpbm(bytes)) return absl::DataLossError("not a binary netpbm (P5 or P6) image");
  NetpbmHeader h;
  h.channels = bytes[1] == '6' ? 3 : 1;
  size_t at = 2;
  const int64_t width = NextField(bytes, &at), height = NextField(bytes, &at), maxval = NextField(bytes, &at);
  // One whitespace byte ends the header; the pixels follow.
  if (width < 1 || height < 1 || maxval < 0 || at >= bytes.size() ||
      !std::isspace(static_cast<unsigned char>(bytes[at]))) {
    return absl::DataLossError("corrupt netpbm image: malformed header");
  }
  if (maxval != 255) {
    return absl::DataLossError(absl::StrCat("netpbm image with maxval ", maxval, ": only 8-bit (255) is read"));
  }
  h.width = static_cast<int>(width);
  h.height = static_cast<int>(height);
  h.pixels_at = at + 1;
  const uint64_t needed = static_cast<uint64_t>(width) * static_cast<uint64_t>(height) * h.channels;
  if (bytes.size() - h.pixels_at < needed) {
    return absl::DataLossError(absl::StrCat("truncated netpbm image: ", width, "x", height, "x", h.channels, " needs ",
                                            needed, " pixel bytes, has ", bytes.size() - h.pixels_at));
  }
  return h;
}

}  // namespace sluice::kernels
