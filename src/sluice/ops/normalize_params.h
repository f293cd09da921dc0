// The params of crop_mirror_normalize (HWC uint8 in, CHW float32 / float16
// (normalized) or uint8 (normalized later on the GPU) out, with an optional
// centre crop and a random mirror, in one pass), shared by its cuda kernel
// (cuda/normalize.cc) and by a decode op that resamples straight into the
// normalized output (decode_params.h).
#ifndef SLUICE_OPS_NORMALIZE_PARAMS_H_
#define SLUICE_OPS_NORMALIZE_PARAMS_H_

#include <cstdint>
#include <vector>

#include "sluice/core/dtype.h"
#include "sluice/kernels/normalize_rows.h"
#include "sluice/ops/field.h"
#include "sluice/ops/kernel.h"

namespace sluice::ops {

// A row of a sample to its normalized output, with a random mirror. uint8
// output copies the values unnormalized (a and b are then 1 and 0).
class Normalizer {
 public:
  Normalizer(int64_t h, int64_t w, int64_t channels, DType out, bool chw, float mirror_p, std::vector<float> a,
             std::vector<float> b);

  // Whether row r's sample is mirrored: a draw keyed by the op `key`.
  bool Mirror(const KernelContext& ctx, int64_t r, uint64_t key) const;
  // Writes row y of a sample, from w * channels values at `row` (HWC),
  // into the sample's output at `dst`.
  void Row(const uint8_t* row, int64_t y, bool mirror, uint8_t* dst) const;
  // All h rows of a sample, row y's values at rows + y * stride.
  void Rows(const uint8_t* rows, int64_t stride, bool mirror, uint8_t* dst) const;
  // The same from levels held channel by channel (0..255 as int16): channel
  // c's w values at levels + c * channel_stride. Values identical to Row's.
  void Planes(const int16_t* levels, int64_t channel_stride, int64_t y, bool mirror, uint8_t* dst) const;

  bool random() const { return mirror_p_ > 0 && mirror_p_ < 1; }
  // What the cuda kernel needs to compute the same values.
  const kernels::NormalizeLayout& layout() const { return layout_; }

 private:
  kernels::NormalizeLayout layout_;
  float mirror_p_;
};

// crop_mirror_normalize's params, visible so that a decode op before it can
// take its place (decode_params.h).
struct CropMirrorNormalizeParams {
  ImageDims in;
  int64_t h, w;  // after the centre crop
  Normalizer normalizer;

  bool crops() const { return h != in.h || w != in.w; }
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_NORMALIZE_PARAMS_H_
