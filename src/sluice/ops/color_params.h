// Element-wise value ops: cast, rescale, normalize. Their params are shared
// by the kernels of every backend (ops/cuda/ has rescale and normalize).
#ifndef SLUICE_OPS_COLOR_PARAMS_H_
#define SLUICE_OPS_COLOR_PARAMS_H_

#include <cstdint>
#include <vector>

#include "sluice/core/dtype.h"
#include "sluice/core/shape.h"

namespace sluice::ops {

struct CastParams {
  DType from, to;
  int64_t elems;    // per sample
  float scale = 1;  // to_dtype with scale: each value times this first, in float32
};

// out = in * scale + offset, as float32.
struct RescaleParams {
  DType from;     // uint8 or float32
  int64_t elems;  // per sample
  float scale, offset;
};

// out = in * a[c] + b[c] as float32, c the channel of each value:
// (in * scale - mean[c]) / std[c] folded into one multiply-add.
struct NormalizeParams {
  DType from;   // uint8 or float32
  Shape shape;  // per sample
  bool channels_first;
  std::vector<float> a, b;  // one per channel (one in all for a single mean and std on HWC data)
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_COLOR_PARAMS_H_
