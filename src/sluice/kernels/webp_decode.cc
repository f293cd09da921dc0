#include "sluice/kernels/webp_decode.h"

#include <webp/decode.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sluice::kernels {
namespace {

absl::string_view Said(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "a feature libwebp does not decode";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "the file ends within the image";
    default:
      return "cannot be decoded";
  }
}

absl::Status Corrupt(absl::string_view what) { return absl::DataLossError(absl::StrCat("corrupt WebP: ", what)); }

// libwebp's failure: short of data where the file holds no image at all
// (an extended header alone) says so.
absl::Status Failed(absl::string_view bytes, VP8StatusCode status) {
  if (status == VP8_STATUS_NOT_ENOUGH_DATA && !absl::StrContains(bytes, "VP8 ") && !absl::StrContains(bytes, "VP8L")) {
    return Corrupt("no image data (no VP8 or VP8L chunk)");
  }
  return Corrupt(Said(status));
}

absl::Status ReadFeatures(absl::string_view bytes, WebPBitstreamFeatures* features) {
  const VP8StatusCode status = WebPGetFeatures(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), features);
  if (status != VP8_STATUS_OK) return Failed(bytes, status);
  if (features->has_animation) {
    return absl::DataLossError("an animated WebP: a sample must be one image (take a frame out of it first)");
  }
  return absl::OkStatus();
}

}  // namespace

bool IsWebp(absl::string_view bytes) {
  return bytes.size() >= 12 && bytes.substr(0, 4) == "RIFF" && bytes.substr(8, 4) == "WEBP";
}

absl::Status ReadWebpSize(absl::string_view bytes, int* width, int* height) {
  WebPBitstreamFeatures features;
  if (absl::Status read = ReadFeatures(bytes, &features); !read.ok()) return read;
  *width = features.width;
  *height = features.height;
  return absl::OkStatus();
}

absl::Status DecodeWebpRgb(absl::string_view bytes, int* width, int* height, std::vector<uint8_t>* pixels) {
  if (absl::Status size = ReadWebpSize(bytes, width, height); !size.ok()) return size;
  const size_t row = static_cast<size_t>(*width) * 3;
  const size_t total = row * static_cast<size_t>(*height);
  if (pixels->size() < total) pixels->resize(total);
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return Corrupt("libwebp's version does not match its header");
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = pixels->data();
  config.output.u.RGBA.stride = static_cast<int>(row);
  config.output.u.RGBA.size = total;
  const VP8StatusCode status = WebPDecode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);  // external memory: frees nothing of ours
  return status == VP8_STATUS_OK ? absl::OkStatus() : Failed(bytes, status);
}

}  // namespace sluice::kernels
