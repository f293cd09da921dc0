// Where a position outside an image reads from: the padding modes of
// torchvision's Pad (and numpy's pad), shared by the filters and the pads.
#ifndef SLUICE_KERNELS_BORDER_H_
#define SLUICE_KERNELS_BORDER_H_

#include <cstdint>

namespace sluice::kernels {

enum class PadMode {
  kConstant,   // a fill value
  kEdge,       // aaa|abcd|ddd
  kReflect,    // dcb|abcd|cba (reflect-101: the edge is not repeated)
  kSymmetric,  // cba|abcd|dcb (the edge is repeated)
};

// i mod period, in [0, period).
inline int64_t PositiveModulo(int64_t i, int64_t period) {
  const int64_t r = i % period;
  return r < 0 ? r + period : r;
}

// The position that position i of an axis of n values reads (i may be
// anywhere: reflections repeat, as numpy's pad does), or -1 for kConstant
// outside the axis.
inline int64_t BorderIndex(int64_t i, int64_t n, PadMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return i < 0 ? 0 : n - 1;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      // Taken modulo the period, not reflected step by step: a warp's far
      // coordinates (a million pixels away) took that many steps a pixel.
      const int64_t r = PositiveModulo(i, 2 * n - 2);
      return r < n ? r : 2 * n - 2 - r;
    }
    case PadMode::kSymmetric: {
      const int64_t r = PositiveModulo(i, 2 * n);
      return r < n ? r : 2 * n - 1 - r;
    }
  }
  return -1;
}

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_BORDER_H_
