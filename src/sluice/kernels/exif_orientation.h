// A photo's EXIF orientation: how its stored pixels turn upright (a phone
// stores the sensor's rows and tags the rotation). The decode ops apply it
// on request (adjust_orientation), as OpenCV's imread and DALI's decoders
// do; torchvision's PIL loader and decode_jpeg leave it by default.
#ifndef SLUICE_KERNELS_EXIF_ORIENTATION_H_
#define SLUICE_KERNELS_EXIF_ORIENTATION_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "sluice/kernels/image_decoder.h"

namespace sluice::kernels {

// The orientation tag (1 to 8, TIFF's numbering) of a JPEG's APP1 "Exif"
// segment, a PNG's eXIf chunk or a WebP's EXIF chunk; 1 (as stored) when
// there is none or it cannot be read.
int ExifOrientation(absl::string_view image);

// Whether orientation `o` swaps width and height (5 to 8).
inline bool Transposes(int o) { return o >= 5 && o <= 8; }

// The stored pixels' window that `upright` (a window of the upright image)
// is, for an image stored `width` x `height`.
Window StoredWindow(const Window& upright, int orientation, int width, int height);

// `stored` (width x height x channels, rows packed) turned upright into
// `upright` (height x width when Transposes(orientation)).
void TurnUpright(const uint8_t* stored, int width, int height, int channels, int orientation, uint8_t* upright);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_EXIF_ORIENTATION_H_
