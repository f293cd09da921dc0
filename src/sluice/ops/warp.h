// Geometric ops as affine maps from output to input pixel coordinates, so
// that consecutive ones (flip, rotation, zoom) can be composed and applied
// with a single resampling.
#ifndef SLUICE_OPS_WARP_H_
#define SLUICE_OPS_WARP_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sluice/core/dtype.h"
#include "sluice/core/rng.h"
#include "sluice/ops/field.h"
#include "sluice/ops/kernel.h"

namespace sluice::ops {

// src_x = m[0]*x + m[1]*y + m[2]; src_y = m[3]*x + m[4]*y + m[5], with pixel
// centres at integer coordinates (as OpenCV's warpAffine and Keras' layers).
struct Affine {
  float m[6] = {1, 0, 0, 0, 1, 0};
};

// The map of "apply `first`, then `second`": second's output pixel p reads
// first's output at second(p), which reads the input at first(second(p)).
Affine Then(const Affine& first, const Affine& second);

// Where samples outside the image come from.
enum class FillMode { kConstant, kNearest, kReflect };

struct WarpSpec {
  DType dtype;
  ImageDims dims;
  FillMode fill_mode;
  float fill_value;
};

// Bilinear resampling of one image. Each of the four neighbours outside the
// image is mapped by `fill_mode` (constant: fill_value; nearest: clamped;
// reflect: fedcba|abcdef|fedcba), as OpenCV's remap borders do.
void WarpAffine(const WarpSpec& spec, const Affine& map, const uint8_t* src, uint8_t* dst);

// A kernel whose op is an affine map drawn per sample.
class WarpKernel : public Kernel {
 public:
  explicit WarpKernel(WarpSpec spec) : spec_(spec) {}
  const WarpSpec& spec() const { return spec_; }
  // The map for one sample; draws from `rng` in a fixed order.
  virtual Affine SampleMap(SampleRng& rng) const = 0;

  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override;

 private:
  WarpSpec spec_;
};

// One kernel applying `parts` in order with one resampling; each part draws
// from the stream of its own op key, so the transforms are the ones the
// unfused ops would apply. Only interpolation differs (once instead of once
// per op). REQUIRES: parts share dtype, dims and fill.
std::shared_ptr<const Kernel> FuseWarps(
    std::vector<std::pair<std::shared_ptr<const WarpKernel>, uint64_t>> parts);

// Whether two warps can share one resampling.
bool CanFuse(const WarpSpec& a, const WarpSpec& b);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_WARP_H_
