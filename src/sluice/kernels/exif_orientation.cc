#include "sluice/kernels/exif_orientation.h"

#include <cstring>

namespace sluice::kernels {
namespace {

constexpr uint16_t kOrientationTag = 0x0112;
constexpr absl::string_view kExifHeader("Exif\0\0", 6);

uint32_t Read(const unsigned char* p, int bytes, bool little) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = little ? v | uint32_t{p[i]} << (8 * i) : (v << 8) | p[i];
  return v;
}

// The orientation in a TIFF structure's first directory (EXIF's IFD0).
int TiffOrientation(absl::string_view tiff) {
  const auto* b = reinterpret_cast<const unsigned char*>(tiff.data());
  const size_t n = tiff.size();
  if (n < 8 || (tiff.substr(0, 2) != "II" && tiff.substr(0, 2) != "MM")) return 1;
  const bool little = tiff[0] == 'I';
  const size_t ifd = Read(b + 4, 4, little);
  if (ifd > n || n - ifd < 2) return 1;
  const size_t entries = Read(b + ifd, 2, little);
  for (size_t i = 0; i < entries; ++i) {
    const size_t e = ifd + 2 + 12 * i;
    if (e + 12 > n) break;
    if (Read(b + e, 2, little) != kOrientationTag) continue;
    const uint32_t value = Read(b + e + 8, 2, little);  // a SHORT, held in the entry
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

int JpegOrientation(absl::string_view jpeg) {
  const auto* b = reinterpret_cast<const unsigned char*>(jpeg.data());
  size_t pos = 2;
  while (pos + 4 <= jpeg.size() && b[pos] == 0xFF) {
    const unsigned char marker = b[pos + 1];
    if (marker == 0xDA || marker == 0xD9) break;  // the scan: metadata comes before it
    const size_t length = Read(b + pos + 2, 2, false);
    const absl::string_view body = jpeg.substr(pos + 4, length >= 2 ? length - 2 : 0);
    if (marker == 0xE1 && body.substr(0, kExifHeader.size()) == kExifHeader) {
      return TiffOrientation(body.substr(kExifHeader.size()));
    }
    pos += 2 + length;
  }
  return 1;
}

int PngOrientation(absl::string_view png) {
  const auto* b = reinterpret_cast<const unsigned char*>(png.data());
  for (size_t pos = 8; pos + 12 <= png.size();) {
    const size_t length = Read(b + pos, 4, false);
    if (png.substr(pos + 4, 4) == "eXIf") return TiffOrientation(png.substr(pos + 8, length));
    if (png.substr(pos + 4, 4) == "IEND" || length > png.size()) break;
    pos += 12 + length;
  }
  return 1;
}

int WebpOrientation(absl::string_view webp) {
  const auto* b = reinterpret_cast<const unsigned char*>(webp.data());
  for (size_t pos = 12; pos + 8 <= webp.size();) {
    const size_t length = Read(b + pos + 4, 4, true);
    if (webp.substr(pos, 4) == "EXIF") {
      absl::string_view exif = webp.substr(pos + 8, length);
      if (exif.substr(0, kExifHeader.size()) == kExifHeader) exif.remove_prefix(kExifHeader.size());
      return TiffOrientation(exif);
    }
    if (length > webp.size()) break;
    pos += 8 + length + (length & 1);
  }
  return 1;
}

}  // namespace

int ExifOrientation(absl::string_view image) {
  if (image.substr(0, 3) == "\xff\xd8\xff") return JpegOrientation(image);
  if (image.substr(0, 8) == "\x89PNG\r\n\x1a\n") return PngOrientation(image);
  if (image.size() >= 12 && image.substr(0, 4) == "RIFF" && image.substr(8, 4) == "WEBP") {
    return WebpOrientation(image);
  }
  return 1;
}

// Orientation o maps stored (x, y) in a W x H image to upright:
//   1 (x, y)  2 (W-1-x, y)  3 (W-1-x, H-1-y)  4 (x, H-1-y)
//   5 (y, x)  6 (H-1-y, x)  7 (H-1-y, W-1-x)  8 (y, W-1-x)
Window StoredWindow(const Window& upright, int orientation, int width, int height) {
  const double x = upright.x, y = upright.y, w = upright.w, h = upright.h;
  Window s = upright;
  switch (orientation) {
    case 2:
      s.x = width - x - w;
      break;
    case 3:
      s.x = width - x - w;
      s.y = height - y - h;
      break;
    case 4:
      s.y = height - y - h;
      break;
    case 5:
      s = Window{y, x, h, w, upright.inside};
      break;
    case 6:
      s = Window{y, height - x - w, h, w, upright.inside};
      break;
    case 7:
      s = Window{width - y - h, height - x - w, h, w, upright.inside};
      break;
    case 8:
      s = Window{width - y - h, x, h, w, upright.inside};
      break;
    default:
      break;
  }
  return s;
}

void TurnUpright(const uint8_t* stored, int width, int height, int channels, int orientation, uint8_t* upright) {
  const int up_w = Transposes(orientation) ? height : width;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      int ux = x, uy = y;
      switch (orientation) {
        case 2:
          ux = width - 1 - x;
          break;
        case 3:
          ux = width - 1 - x;
          uy = height - 1 - y;
          break;
        case 4:
          uy = height - 1 - y;
          break;
        case 5:
          ux = y;
          uy = x;
          break;
        case 6:
          ux = height - 1 - y;
          uy = x;
          break;
        case 7:
          ux = height - 1 - y;
          uy = width - 1 - x;
          break;
        case 8:
          ux = y;
          uy = width - 1 - x;
          break;
        default:
          break;
      }
      std::memcpy(upright + (static_cast<size_t>(uy) * up_w + ux) * channels,
                  stored + (static_cast<size_t>(y) * width + x) * channels, channels);
    }
  }
}

}  // namespace sluice::kernels
