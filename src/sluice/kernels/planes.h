// An image's interleaved channels [H,W,C] into planes [C,H,W] (hwc_to_chw
// where no warp before it writes planes itself).
#ifndef SLUICE_KERNELS_PLANES_H_
#define SLUICE_KERNELS_PLANES_H_

#include <cstddef>
#include <cstdint>

#include "sluice/core/shape.h"

namespace sluice::kernels {

// dst[c][y][x] = src[y][x][c] for elements of `elem_bytes`: 1, 2, 4 or 8.
// Three channels of 1 or 4 bytes, the common images, take vector
// de-interleaving; the rest typed loops.
void HwcToChw(const ImageDims& d, size_t elem_bytes, const uint8_t* src, uint8_t* dst);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_PLANES_H_
