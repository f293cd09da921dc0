// Image elements moved without arithmetic: interleaved channels into planes
// (hwc_to_chw where no warp before it writes planes itself), rows mirrored
// (random_flip alone).
#ifndef SLUICE_KERNELS_LAYOUT_H_
#define SLUICE_KERNELS_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "sluice/core/shape.h"

namespace sluice::kernels {

// dst[c][y][x] = src[y][x][c] for elements of `elem_bytes`: 1, 2, 4 or 8.
// Three channels of 1 or 4 bytes, the common images, take vector
// de-interleaving; the rest typed loops.
void HwcToChw(const ImageDims& d, size_t elem_bytes, const uint8_t* src, uint8_t* dst);

// dst pixel x = src pixel w - 1 - x, for pixels of `pixel_bytes`. The
// sizes of images with 1 to 4 channels of 1, 2 or 4 bytes are copied as
// fixed-size moves (a memcpy call a pixel took 4x as long on 224x224x3).
void MirrorRow(const uint8_t* src, int64_t w, size_t pixel_bytes, uint8_t* dst);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_LAYOUT_H_
