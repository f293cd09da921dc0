// torchvision's luma of an RGB uint8 pixel (F.rgb_to_grayscale): 0.2989 r +
// 0.587 g + 0.114 b in float32, each product rounded, summed in that order,
// truncated. Shared by grayscale and the color adjustments built on it.
#ifndef SLUICE_KERNELS_LUMA_H_
#define SLUICE_KERNELS_LUMA_H_

#include <array>
#include <cstdint>

namespace sluice::kernels {

class Luma {
 public:
  Luma() {
    const float weights[3] = {0.2989f, 0.587f, 0.114f};
    for (int ch = 0; ch < 3; ++ch) {
      for (int v = 0; v < 256; ++v) products_[ch][v] = weights[ch] * static_cast<float>(v);
    }
  }
  // The products are looked up, so no compiler can fuse them into the sums.
  uint8_t operator()(const uint8_t* rgb) const {
    return static_cast<uint8_t>((products_[0][rgb[0]] + products_[1][rgb[1]]) + products_[2][rgb[2]]);
  }

 private:
  std::array<std::array<float, 256>, 3> products_;
};

// The one table every op shares (built once, on first use).
inline const Luma& TorchLuma() {
  static const Luma luma;
  return luma;
}

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_LUMA_H_
