// Binary netpbm images (PGM "P5", PPM "P6", 8-bit): raw pixels behind a
// text header. They are how decoded images of any size travel as bytes (a
// Python dataset's uint8 arrays, sluice.from_dataset), so the image ops
// read them as they read JPEG and PNG, with no decoding to pay.
#ifndef SLUICE_KERNELS_NETPBM_H_
#define SLUICE_KERNELS_NETPBM_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::kernels {

struct NetpbmHeader {
  int width = 0, height = 0;
  int channels = 0;      // 1 (P5) or 3 (P6)
  size_t pixels_at = 0;  // where the pixel rows start
};

// Whether the bytes start as a binary netpbm image does.
bool IsNetpbm(absl::string_view bytes);

// The header, checked against the bytes that follow it: DataLoss for a
// malformed header, a maxval other than 255, or too few pixel bytes.
absl::StatusOr<NetpbmHeader> ReadNetpbmHeader(absl::string_view bytes);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_NETPBM_H_
