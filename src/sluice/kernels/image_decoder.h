// Decoding JPEG (libjpeg-turbo, through the libjpeg API, which can crop and
// scale inside the decoder), PNG (libpng), WebP (libwebp) and raw netpbm
// pixels (netpbm.h) into 8-bit RGB, whole or only the window a crop needs.
#ifndef SLUICE_KERNELS_IMAGE_DECODER_H_
#define SLUICE_KERNELS_IMAGE_DECODER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::kernels {

struct ImageInfo {
  int width = 0, height = 0;
  bool jpeg = false;
  bool webp = false;
  bool netpbm = false;  // raw pixels (netpbm.h)
};

// The image's size, from its header. DataLoss for bytes that are not a
// well-formed JPEG, PNG, WebP or netpbm header, or that are truncated
// (io/image_framing).
absl::StatusOr<ImageInfo> ReadImageInfo(absl::string_view bytes);

// A window of the source image, in source pixels. Resized, it is a crop of
// the whole image resized (torchvision's Resize then CenterCrop): the
// filter reads past its edges as far as it reaches; `inside`, it is cropped
// and then resized (RandomResizedCrop): the filter reads only its pixels.
struct Window {
  double x = 0, y = 0, w = 0, h = 0;
  bool inside = false;
};

// The source pixels the resize filter reads past a window of `extent`
// pixels made `out`, on each side: the triangle's half-width, and one for
// its rounding.
int FilterReach(double extent, int out);

// All of the image.
Window WholeImage(const ImageInfo& info);

// RGB pixels of a decoded region: rows of `width` * 3 bytes. `window` is
// where the requested window lies within it, in its own (possibly
// DCT-scaled) pixels.
struct DecodedRegion {
  std::vector<uint8_t> pixels;  // reused from call to call; may be longer than the region
  int width = 0, height = 0;
  Window window;
};

// Decodes at least `window` of the image into RGB (grayscale and CMYK
// converted; progressive JPEGs too), for a resize to `out_w` x `out_h`.
// JPEGs decode only the rows and (iMCU-aligned) columns the window and the
// filter's reach past it cover, and when `scale_denom` is 2, 4 or 8 at that
// fraction of the size in the DCT. DataLoss with libjpeg's, libpng's or
// libwebp's message for corrupt data.
absl::Status DecodeRegion(absl::string_view bytes, const ImageInfo& info, const Window& window, int scale_denom,
                          int out_w, int out_h, DecodedRegion* out);

// The largest of 1, 2, 4 and 8 that scaling a `window` of a JPEG by still
// leaves at least `out_w` x `out_h` pixels: decoding smaller costs less and
// the resize that follows shrinks anyway. 1 for the other formats.
int DctScaleFor(const ImageInfo& info, const Window& window, int out_w, int out_h);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_IMAGE_DECODER_H_
