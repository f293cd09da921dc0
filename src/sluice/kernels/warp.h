// Geometric ops as maps from output to input pixel coordinates (affine, or
// projective for random_perspective), so that consecutive ones can be
// composed and applied with a single resampling.
#ifndef SLUICE_KERNELS_WARP_H_
#define SLUICE_KERNELS_WARP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/dtype.h"
#include "sluice/core/shape.h"

namespace sluice::kernels {

// src_x = m[0]*x + m[1]*y + m[2]; src_y = m[3]*x + m[4]*y + m[5], with pixel
// centres at integer coordinates (as OpenCV's warpAffine and Keras' layers).
// A projective map (a homography) divides both by p[0]*x + p[1]*y + p[2];
// affine maps keep p = (0, 0, 1) and never divide.
struct Affine {
  float m[6] = {1, 0, 0, 0, 1, 0};
  float p[3] = {0, 0, 1};
  bool projective() const { return p[0] != 0 || p[1] != 0 || p[2] != 1; }
};

// The map of "apply `first`, then `second`": second's output pixel p reads
// first's output at second(p), which reads the input at first(second(p)).
Affine Then(const Affine& first, const Affine& second);

// The map `centred` gives in coordinates centred on the image ((w - 1) / 2,
// (h - 1) / 2, torchvision's), in pixels.
Affine FromCentred(const double centred[6], const ImageDims& dims);

// Where samples outside the image come from.
enum class FillMode { kConstant, kNearest, kReflect };

struct WarpSpec {
  DType dtype;
  ImageDims dims;
  FillMode fill_mode;
  float fill_value;
  // Writes the output as planes [C,H,W] rather than [H,W,C]: a following
  // hwc_to_chw folded into the warp (graph/fusion.h), which saves its pass.
  bool chw_out = false;
  // The input is uint8 (dtype) and the output float32, value * scale +
  // offset: a rescale before the warp folded into it (graph/fusion.h). The
  // taps are interpolated from the uint8 values, in float, then rescaled:
  // the rescaled float image's warp within float rounding, from a quarter
  // of the bytes. fill_value stays in output units.
  bool rescaled = false;
  float scale = 1, offset = 0;
  // The output is written once and read much later
  // (ops::KernelContext::bypass_cache): whole vectors of it go past the
  // caches (non-temporal stores) where WarpBypassFor(spec) says so.
  bool stream = false;
};

// How WarpAffine best writes an output written once and read much later
// (ops::KernelContext::bypass_cache), on the SIMD target the kernels run
// on (bench/RESULTS.md, 2026-12-05 and 2026-12-07 morning).
enum class WarpBypass {
  // spec.stream: the warp streams its whole vectors past the caches (float
  // planes or one channel, each vector a whole cache line: AVX-512). W2
  // 1.05x against the scratch copy on the Xeon.
  kItself,
  // Plain stores: the same outputs from AVX2's half-line vectors, which
  // streamed at half the rate on the Zen 3, where the scratch copy ran W2
  // at 0.87-0.92x of plain stores.
  kPlain,
  // A SampleWriter's L1 scratch, streamed out a whole line at a time
  // (interleaved pixels, uint8 output).
  kScratch,
};
WarpBypass WarpBypassFor(const WarpSpec& spec);

// Bilinear resampling of one image [H,W,C] into `dst` ([H,W,C], or [C,H,W]
// with spec.chw_out). Each of the four neighbours outside the image is
// mapped by `fill_mode` (constant: fill_value; nearest: clamped; reflect:
// fedcba|abcdef|fedcba), as OpenCV's remap borders do.
void WarpAffine(const WarpSpec& spec, const Affine& map, const uint8_t* src, uint8_t* dst);

// torchvision's F.perspective of images of `dims` that moves the image's
// corners (top-left, top-right, bottom-right, bottom-left; x, y each) to
// `corners`: the homography from the moved corners back to the originals,
// solved as _get_perspective_coeffs does (in double here), in the pixel
// convention of this file.
Affine PerspectiveMap(const int corners[8], const ImageDims& dims);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_WARP_H_
