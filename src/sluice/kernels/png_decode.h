// PNG images as 8-bit RGB, as OpenCV's imread, PIL's convert("RGB") and
// torchvision read them: palettes and gray expanded, alpha dropped (not
// blended onto anything), 16-bit samples cut to their high byte (OpenCV's
// and torchvision's uint16 to uint8), no gamma applied.
#ifndef SLUICE_KERNELS_PNG_DECODE_H_
#define SLUICE_KERNELS_PNG_DECODE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::kernels {

// Whether the bytes start with PNG's signature.
bool IsPng(absl::string_view bytes);

// The image's size from its header; DataLoss ("corrupt PNG: ...") when
// the header cannot be read.
absl::Status ReadPngSize(absl::string_view bytes, int* width, int* height);

// The whole image, width * height * 3 bytes into `pixels` (grown, never
// shrunk); DataLoss ("corrupt PNG: ...") naming what libpng found wrong.
absl::Status DecodePngRgb(absl::string_view bytes, int* width, int* height, std::vector<uint8_t>* pixels);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_PNG_DECODE_H_
