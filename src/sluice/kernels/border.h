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
    case PadMode::kReflect:
      if (n == 1) return 0;
      while (i < 0 || i >= n) i = i < 0 ? -i : 2 * n - 2 - i;
      return i;
    case PadMode::kSymmetric:
      while (i < 0 || i >= n) i = i < 0 ? -i - 1 : 2 * n - 1 - i;
      return i;
  }
  return -1;
}

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_BORDER_H_
