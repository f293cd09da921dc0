// torchvision's functional adjustments of one uint8 image [H,W,C], with its
// tensor arithmetic step for step in float32 (image_adjust.cc is compiled
// with -ffp-contract=off: no product is fused into a sum where torch rounds
// it first), so the bytes are torchvision's. Shared by the single ops
// (color_jitter, adjust_sharpness, the level ops) and the policies that
// chain them (rand_augment, trivial_augment_wide, auto_augment).
#ifndef SLUICE_KERNELS_IMAGE_ADJUST_H_
#define SLUICE_KERNELS_IMAGE_ADJUST_H_

#include <array>
#include <cstdint>

#include "sluice/core/shape.h"

namespace sluice::kernels {

// A map of the 256 levels.
using Lut = std::array<uint8_t, 256>;

// The tables of F.invert, F.posterize (the top `bits` bits kept) and
// F.solarize (levels >= threshold inverted).
Lut InvertLut();
Lut PosterizeLut(int bits);
Lut SolarizeLut(double threshold);

// img[i] = lut[src[i]] for the n levels.
void ApplyLut(const Lut& lut, int64_t n, const uint8_t* src, uint8_t* dst);

// F.autocontrast and F.equalize: a table per channel, made from the
// channel's histogram in this image.
enum class ChannelStretch { kAutocontrast, kEqualize };
void StretchChannels(ChannelStretch kind, const ImageDims& d, const uint8_t* src, uint8_t* dst);

// F.adjust_brightness, F.adjust_contrast (blend with the mean luma),
// F.adjust_saturation (blend with each pixel's luma; one channel: left as
// it is) and F.adjust_hue (RGB only; one channel: left), in place. C is 1
// or 3.
void AdjustBrightness(double factor, const ImageDims& d, uint8_t* img);
void AdjustContrast(double factor, const ImageDims& d, uint8_t* img);
void AdjustSaturation(double factor, const ImageDims& d, uint8_t* img);
void AdjustHue(double factor, const ImageDims& d, uint8_t* img);

// F.adjust_sharpness: blended with the image whose interior is blurred by
// [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13; images of 2 pixels or less a side
// are copied as they are.
void AdjustSharpness(double factor, const ImageDims& d, const uint8_t* src, uint8_t* dst);

// F.affine and F.rotate on a uint8 tensor with nearest interpolation:
// `inverse` is _get_inverse_affine_matrix's, from output to input pixels in
// coordinates centred on the image ((w - 1) / 2, (h - 1) / 2); the grid is
// computed and rounded as torch's affine_grid and grid_sample do (float32,
// ties to even). Pixels whose nearest source lies outside get `fill` (one
// level per channel).
void AffineNearest(const ImageDims& d, const double inverse[6], const uint8_t* fill, const uint8_t* src, uint8_t* dst);

// _get_inverse_affine_matrix(center, angle, translate, scale, shear): the
// output-to-input map of a rotation by `angle` degrees, a scale and shears
// (degrees, x and y) about `center`, then a shift, all in centred
// coordinates.
struct AffineArgs {
  double center_x = 0, center_y = 0, angle = 0, translate_x = 0, translate_y = 0, scale = 1, shear_x = 0, shear_y = 0;
};
void InverseAffineMatrix(const AffineArgs& a, double m[6]);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_IMAGE_ADJUST_H_
