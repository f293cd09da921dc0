// Separable neighbourhood filters on one image [H,W] or [H,W,C], as two
// passes over contiguous rows of W*C values (row_kernels.h): a Gaussian blur
// (float, or uint8 in 16-bit fixed point) and a grey dilation (the max is
// exact in any type).
//
// Written by hand rather than calling OpenCV: on MNIST/CIFAR-sized images
// OpenCV's per-call setup dominates (GaussianBlur 11x11 on 28x28 float runs at
// ~167k images/s on one core here, below W1's target), and its uint8 blur
// takes a bit-exact fixed-point path 3-7x slower than float. Tests compare
// them with OpenCV.
#ifndef SLUICE_KERNELS_IMAGE_FILTER_H_
#define SLUICE_KERNELS_IMAGE_FILTER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "sluice/core/shape.h"
#include "sluice/kernels/row_kernels.h"

namespace sluice::kernels {

// For each of the n + 2r padded positions of an axis, the position it reads:
// reflected (reflect-101), or -1 (outside: the fill value) when `reflect` is
// false.
std::vector<int32_t> BorderMap(int64_t n, int64_t r, bool reflect);
// Normalized 1-D Gaussian taps at x = -(k-1)/2 .. (k-1)/2, as torchvision's
// and tfa's gaussian kernels (and OpenCV's getGaussianKernel for sigma > 0).
void GaussianTaps(int64_t k, float sigma, float* taps);

// Where each value of a padded row's left and right border comes from: an
// index into the input row, or -1 for the fill. Flat over x and channel, so
// filling a border is one short loop of copies per row.
struct RowBorders {
  std::vector<int32_t> left, right;
  RowBorders(const std::vector<int32_t>& xmap, int64_t w, int64_t r, int64_t c) {
    auto from = [&](int64_t x, int64_t ch) { return xmap[x] < 0 ? -1 : static_cast<int32_t>(xmap[x] * c + ch); };
    for (int64_t x = 0; x < r; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) left.push_back(from(x, ch));
    }
    for (int64_t x = r + w; x < 2 * r + w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) right.push_back(from(x, ch));
    }
  }
};

// A separable filter's geometry: the image and the border maps of both axes.
struct FilterShape {
  ImageDims dims;
  int64_t kh, kw;
  std::vector<int32_t> ymap;  // BorderMap of the vertical axis
  RowBorders borders;         // the horizontal axis's, per row
  // The same borders as byte shuffles, where a uint8 row's come from its
  // first and last 16 bytes (small kernels on rows of 16 bytes or more).
  std::optional<BorderShuffle> shuffle;
  FilterShape(ImageDims d, int64_t kh, int64_t kw, bool reflect)
      : dims(d),
        kh(kh),
        kw(kw),
        ymap(BorderMap(d.h, kh / 2, reflect)),
        borders(BorderMap(d.w, kw / 2, reflect), d.w, kw / 2, d.c),
        shuffle(ShuffleOf(borders, d.row_elems())) {}

  static std::optional<BorderShuffle> ShuffleOf(const RowBorders& b, int64_t n) {
    if (n < 16 || b.left.size() > 16 || b.right.size() > 16) return std::nullopt;
    BorderShuffle s{};
    s.left_count = static_cast<int64_t>(b.left.size());
    s.right_count = static_cast<int64_t>(b.right.size());
    for (size_t i = 0; i < b.left.size(); ++i) {
      if (b.left[i] >= 16) return std::nullopt;
      s.left[i] = b.left[i] < 0 ? 0x80 : static_cast<uint8_t>(b.left[i]);
    }
    for (size_t i = 0; i < b.right.size(); ++i) {
      if (b.right[i] >= 0 && b.right[i] < n - 16) return std::nullopt;
      s.right[i] = b.right[i] < 0 ? 0x80 : static_cast<uint8_t>(b.right[i] - (n - 16));
    }
    return s;
  }
};

// A blur's taps for both axes, x's then y's: float, and Q15 for uint8 images.
struct BlurTaps {
  int64_t kw = 0, kh = 0;
  std::vector<float> w;
  std::vector<int16_t> q;
  // The taps of `sigma` for a kw x kh kernel (Q15 ones too for uint8).
  void Compute(int64_t kw_, int64_t kh_, float sigma, bool fixed_point);
  // Drops each axis's negligible end taps, so that the filter's borders
  // narrow with them (W2's 11 taps at sigma 0.8 are 7 in Q15).
  void Trim(bool fixed_point);
};

// Blurs a uint8 image in fixed point with Q15 taps (x's, then y's), or a
// float image with float taps. Thread-safe (scratch is per thread).
void BlurFixedImage(const uint8_t* src, uint8_t* dst, const FilterShape& f, const int16_t* wx, const int16_t* wy);
void BlurFloatImage(const float* src, float* dst, const FilterShape& f, const float* wx, const float* wy);
// Dilates one image as its own type (uint8_t or float). Thread-safe.
template <typename T>
void DilateImage(const T* src, T* dst, const FilterShape& f);

}  // namespace sluice::kernels

#endif  // SLUICE_KERNELS_IMAGE_FILTER_H_
