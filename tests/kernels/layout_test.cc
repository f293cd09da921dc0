#include "sluice/kernels/layout.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::kernels {
namespace {

// Every pixel size, those with fixed-size moves and those without: pixel
// x holds the bytes of pixel w - 1 - x, and nothing past the row changes.
TEST(MirrorRow, EachPixelTakesItsMirrorsBytes) {
  for (size_t pixel = 1; pixel <= 17; ++pixel) {
    for (const int64_t w : {1, 2, 7, 224}) {
      const size_t bytes = static_cast<size_t>(w) * pixel;
      std::vector<uint8_t> src(bytes);
      for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
      std::vector<uint8_t> dst(bytes + 8, 0xee);
      MirrorRow(src.data(), w, pixel, dst.data());
      for (int64_t x = 0; x < w; ++x) {
        for (size_t b = 0; b < pixel; ++b) {
          ASSERT_EQ(dst[x * pixel + b], src[(w - 1 - x) * pixel + b]) << "pixel bytes " << pixel << " w " << w;
        }
      }
      for (size_t i = bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xee) << "wrote past the row";
    }
  }
}

}  // namespace
}  // namespace sluice::kernels
