// WebP images (libwebp; lossy and lossless, the simple and the extended
// file format) as 8-bit RGB, as PIL's convert("RGB") and DALI read them:
// alpha dropped, not blended. Animated WebP is refused: a sample is one
// image.
#ifndef SLUICE_KERNELS_WEBP_DECODE_H_
#define SLUICE_KERNELS_WEBP_DECODE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::kernels {

// Whether the bytes start as a WebP file does ("RIFF", a size, "WEBP").
bool IsWebp(absl::string_view bytes);

// The image's size from its header; DataLoss ("corrupt WebP: ...") when
// the header cannot be read, and for an animation.
absl::Status ReadWebpSize(absl::string_view bytes, int* width, int* height);

// The whole image, width * height * 3 bytes into `pixels` (grown, never
// shrunk); DataLoss ("corrupt WebP: ...") naming what libwebp found wrong.
absl::Status DecodeWebpRgb(absl::string_view bytes, int* width, int* height, std::vector<uint8_t>* pixels);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_WEBP_DECODE_H_
